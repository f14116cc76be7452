// Blocked matrix product for many input rows (prefill), in the canonical
// dot-product order of kernels.h, so that every output is bit-identical to
// what the matrix-vector kernels give for the same input row:
//  - a tile of weight rows (full K, so no output's sum is ever split) is
//    decoded once to float32, row-major, zero-padded to whole vectors, the
//    same values the GEMV kernels build in registers (exact conversion for
//    dense, fma(q, scale, bias) for affine);
//  - a register-tiled kernel computes kMr input rows x kNr weight rows of
//    dot products: per K chunk, kMr + kNr vector loads feed kMr * kNr FMAs
//    into one accumulator per output, reduced horizontally once at the end.
// Work is split over weight tiles; when there are too few of those for the
// threads (small N), input rows are split too, at the cost of decoding the
// tile once per split.
#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/simd.h"

G4_CPU_BEGIN
namespace {

// kMr * kNr accumulators + kNr weight vectors + one input vector fit the
// register file (32 vector registers with AVX-512, 16 otherwise).
constexpr int kMr = kLanes == 16 ? 6 : 3;
constexpr int kNr = kLanes == 16 ? 4 : 3;
// Decoded tile budget (floats): a few hundred KiB stays in L2 while every
// input row streams past it.
constexpr int64_t kTileFloats = 1 << 17;
// K block (a multiple of kLanes): the kMr input rows' slice of it stays in
// L1 across the tile's weight rows; the vector accumulators carry over.
constexpr int64_t kKc = 512;
static_assert(kKc % kLanes == 0);

// One K block [k0, k0 + k_len) of the dot products of x rows i < MR with
// w rows r < NR, canonical order. The vector accumulators live in acc
// ([i][r] kLanes floats each, row stride ldacc vectors) between blocks, so splitting K changes
// nothing: the first block starts from zero, the last reduces into y
// (stride ldy). w rows are zero-padded to a whole number of vectors; x is
// read only below k_len.
template <int MR, int NR>
void DotKernel(const float* x, int64_t ldx, int64_t k_len, const float* w, int64_t ldw, float* acc_buf,
               int64_t ldacc, bool first, float* y, int64_t ldy) {
  VF acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = first ? VZero() : VLoad(acc_buf + (i * ldacc + r) * kLanes);
  int64_t k = 0;
  for (; k + kLanes <= k_len; k += kLanes) {
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = VLoad(w + r * ldw + k);
    for (int i = 0; i < MR; ++i) {
      const VF xv = VLoad(x + i * ldx + k);
      for (int r = 0; r < NR; ++r) acc[i][r] = VFma(xv, wv[r], acc[i][r]);
    }
  }
  if (k < k_len) {
    const int n = static_cast<int>(k_len - k);
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = VLoad(w + r * ldw + k);
    for (int i = 0; i < MR; ++i) {
      const VF xv = VLoadN(x + i * ldx + k, n);
      for (int r = 0; r < NR; ++r) acc[i][r] = VFma(xv, wv[r], acc[i][r]);
    }
  }
  if (y) {
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < NR; ++r) y[i * ldy + r] = VReduceAdd(acc[i][r]);
  } else {
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < NR; ++r) VStore(acc_buf + (i * ldacc + r) * kLanes, acc[i][r]);
  }
}

using KernelFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, bool,
                          float*, int64_t);

template <int MR, int... Rs>
constexpr void FillRow(KernelFn* row, std::integer_sequence<int, Rs...>) {
  ((row[Rs] = &DotKernel<MR, Rs + 1>), ...);
}

struct KernelTable {
  KernelFn fn[kMr][kNr];
};

template <int... Ms>
constexpr KernelTable MakeKernelTable(std::integer_sequence<int, Ms...>) {
  KernelTable t{};
  (FillRow<Ms + 1>(t.fn[Ms], std::make_integer_sequence<int, kNr>()), ...);
  return t;
}

// kKernels.fn[mr - 1][nr - 1] handles mr input rows x nr weight rows.
constexpr KernelTable kKernels = MakeKernelTable(std::make_integer_sequence<int, kMr>());

// Rows [0, mr) x columns [k0, k0 + kc) of x into a packed block (row stride
// kKc), zero-padded to whole vectors: the values a masked load would give.
void PackInput(const float* x, int64_t ldx, int mr, int64_t k0, int64_t kc, float* out) {
  const int64_t padded = (kc + kLanes - 1) / kLanes * kLanes;
  for (int i = 0; i < mr; ++i) {
    std::memcpy(out + i * kKc, x + i * ldx + k0, kc * sizeof(float));
    std::memset(out + i * kKc + kc, 0, (padded - kc) * sizeof(float));
  }
}

// Weight rows [n0, n0 + nc) as float32, row stride ldw, zero past k_len.
void DecodeTile(const WeightMatrix& w, int64_t n0, int64_t nc, int64_t ldw, float* tile) {
  for (int64_t r = 0; r < nc; ++r) {
    float* row = tile + r * ldw;
    DecodeRowRange(w, n0 + r, 0, w.cols, row);
    std::memset(row + w.cols, 0, (ldw - w.cols) * sizeof(float));
  }
}

}  // namespace

void Gemm(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  const int64_t n_rows = w.rows, k_len = w.cols;
  const int64_t ldw = (k_len + kLanes - 1) / kLanes * kLanes;
  const int64_t nc_max = std::max<int64_t>(kNr, kTileFloats / std::max<int64_t>(ldw, 1) / kNr * kNr);
  const int64_t n_blocks = (n_rows + nc_max - 1) / nc_max;
  const int64_t threads = TeamSize();
  const int64_t m_blocks = (m_rows + kMr - 1) / kMr;
  int64_t m_splits = 1;
  if (n_blocks < 2 * threads) m_splits = std::min(m_blocks, (2 * threads + n_blocks - 1) / n_blocks);
  const int64_t m_per_split = (m_blocks + m_splits - 1) / m_splits * kMr;
  const int64_t tasks = n_blocks * m_splits;

  const int members = tasks > 1 && m_rows * n_rows * k_len >= (1 << 18) ? TeamSize() : 1;
  ParallelForDynamic(tasks, members, [&](int64_t t) {
    const int64_t n0 = t / m_splits * nc_max;
    const int64_t nc = std::min(nc_max, n_rows - n0);
    const int64_t m_begin = t % m_splits * m_per_split;
    const int64_t m_end = std::min(m_rows, m_begin + m_per_split);
    if (m_begin >= m_end) return;
    float* tile = AlignedThreadScratch(ScratchSlot::kTile, nc_max * ldw);
    float* acc = AlignedThreadScratch(ScratchSlot::kAccumulators, kMr * nc_max * kLanes);
    float* xb = AlignedThreadScratch(ScratchSlot::kInput, kMr * kKc);
    DecodeTile(w, n0, nc, ldw, tile);
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, m_end - m0));
      for (int64_t k0 = 0; k0 < k_len; k0 += kKc) {
        const int64_t kc = std::min(kKc, k_len - k0);
        const bool last = k0 + kKc >= k_len;
        PackInput(x + m0 * ldx, ldx, mr, k0, kc, xb);
        for (int64_t r0 = 0; r0 < nc; r0 += kNr) {
          const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - r0));
          kKernels.fn[mr - 1][nr - 1](xb, kKc, kc, tile + r0 * ldw + k0, ldw, acc + r0 * kLanes, nc_max,
                                      k0 == 0, last ? y + m0 * ldy + n0 + r0 : nullptr, ldy);
        }
      }
    }
  });
}

G4_CPU_END
