// Blocked matrix product for many input rows (prefill). Compute-bound, so
// the point is reuse: a tile of kNc weight rows x kKc columns is dequantized
// once into a float buffer that stays in L2, then every input row block is
// multiplied against it with an MR x NR register-tiled dot-product kernel.
// Dense F32 weights are used in place, without the copy.
//
// Work is split over weight-row blocks; when there are too few of those for
// the threads (small N), input rows are split too, at the cost of decoding
// a tile once per split.
#include <omp.h>

#include <algorithm>
#include <utility>

#include "backend/cpu/kernels.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/simd.h"

namespace g4::cpu {
namespace {

constexpr int64_t kNc = 128;  // weight rows per tile
constexpr int64_t kKc = 512;  // columns per tile (a multiple of every group size)
constexpr int kMr = 4;        // input rows per micro-kernel
constexpr int kNr = kLanes == 16 ? 4 : 2;  // weight rows per micro-kernel

// y[i, r] (+)= sum_k x[i, k] * w[r, k] over k < k_len, for i < MR, r < NR.
template <int MR, int NR>
void MicroKernel(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k_len, float* y,
                 int64_t ldy, bool accumulate) {
  VF acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < NR; ++r) acc[i][r] = VZero();
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
    for (int r = 0; r < NR; ++r) wv[r] = VLoadN(w + r * ldw + k, n);
    for (int i = 0; i < MR; ++i) {
      const VF xv = VLoadN(x + i * ldx + k, n);
      for (int r = 0; r < NR; ++r) acc[i][r] = VFma(xv, wv[r], acc[i][r]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int r = 0; r < NR; ++r) {
      const float s = VReduceAdd(acc[i][r]);
      y[i * ldy + r] = accumulate ? y[i * ldy + r] + s : s;
    }
  }
}

using KernelFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool);

template <int MR, int... NRs>
constexpr void FillRow(KernelFn* row, std::integer_sequence<int, NRs...>) {
  ((row[NRs] = &MicroKernel<MR, NRs + 1>), ...);
}

template <int... MRs>
constexpr auto MakeKernelTable(std::integer_sequence<int, MRs...>) {
  struct Table {
    KernelFn fn[kMr][kNr];
  } t{};
  (FillRow<MRs + 1>(t.fn[MRs], std::make_integer_sequence<int, kNr>()), ...);
  return t;
}

// kKernels.fn[mr - 1][nr - 1] handles an mr x nr block.
constexpr auto kKernels = MakeKernelTable(std::make_integer_sequence<int, kMr>());

}  // namespace

void Gemm(const float* x, int64_t m_rows, const WeightMatrix& w, float* y) {
  const int64_t n_rows = w.rows, k_len = w.cols;
  const bool in_place = !w.is_affine() && w.dtype == DType::kF32;
  const int64_t n_blocks = (n_rows + kNc - 1) / kNc;
  const int64_t threads = omp_get_max_threads();
  const int64_t m_blocks = (m_rows + kMr - 1) / kMr;
  int64_t m_splits = 1;
  if (n_blocks < 2 * threads) m_splits = std::min(m_blocks, (2 * threads + n_blocks - 1) / n_blocks);
  const int64_t m_per_split = (m_blocks + m_splits - 1) / m_splits * kMr;
  const int64_t tasks = n_blocks * m_splits;

#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1 && m_rows * n_rows * k_len >= (1 << 18))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t n0 = t / m_splits * kNc;
    const int64_t nc = std::min(kNc, n_rows - n0);
    const int64_t m_begin = t % m_splits * m_per_split;
    const int64_t m_end = std::min(m_rows, m_begin + m_per_split);
    if (m_begin >= m_end) continue;
    float* tile = in_place ? nullptr : ThreadScratch(ScratchSlot::kTile, kNc * kKc);
    for (int64_t k0 = 0; k0 < k_len; k0 += kKc) {
      const int64_t kc = std::min(kKc, k_len - k0);
      const float* wt;
      int64_t ldw;
      if (in_place) {
        wt = static_cast<const float*>(w.data) + n0 * k_len + k0;
        ldw = k_len;
      } else {
        for (int64_t r = 0; r < nc; ++r) DecodeRowRange(w, n0 + r, k0, kc, tile + r * kc);
        wt = tile;
        ldw = kc;
      }
      for (int64_t m0 = m_begin; m0 < m_end; m0 += kMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kMr, m_end - m0));
        for (int64_t r0 = 0; r0 < nc; r0 += kNr) {
          const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - r0));
          kKernels.fn[mr - 1][nr - 1](x + m0 * k_len + k0, k_len, wt + r0 * ldw, ldw, kc,
                                      y + m0 * n_rows + n0 + r0, n_rows, k0 > 0);
        }
      }
    }
  }
}

}  // namespace g4::cpu
