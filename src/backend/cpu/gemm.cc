// Blocked matrix product for many input rows (prefill). Compute-bound, so
// the point is reuse, BLIS-style:
//  - a tile of kNc weight rows x kKc columns is dequantized once and packed
//    transposed into panels of kNr weight rows ([k][kNr] floats, L2-resident);
//  - a register-tiled outer-product kernel multiplies kMr input rows (read
//    in place, broadcast one element at a time; they stay in L1 across the
//    panels) by one panel: per k, 2 vector loads and kMr broadcasts feed
//    2 * kMr FMAs, and no horizontal sums are needed.
// Work is split over weight-row blocks; when there are too few of those for
// the threads (small N), input rows are split too, at the cost of packing
// the tile once per split.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/cpu/kernels.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/simd.h"

namespace g4::cpu {
namespace {

constexpr int kNr = 2 * kLanes;              // weight rows per panel (two vectors)
constexpr int kMr = kLanes == 16 ? 12 : 6;   // input rows per kernel: 2 * kMr accumulators
constexpr int64_t kNc = 128;                 // weight rows per tile (a multiple of kNr)
constexpr int64_t kKc = 256;                 // columns per tile (a multiple of every group size)
static_assert(kNc % kNr == 0);

// y[i, 0..nr) (+)= sum_k x[i, k] * panel[k, 0..nr) for i < MR.
template <int MR>
void MicroKernel(const float* x, int64_t ldx, const float* panel, int64_t kc, float* y, int64_t ldy,
                 int nr, bool accumulate) {
  VF acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = VZero();
  for (int64_t k = 0; k < kc; ++k) {
    const VF w0 = VLoad(panel + k * kNr), w1 = VLoad(panel + k * kNr + kLanes);
    for (int i = 0; i < MR; ++i) {
      const VF xv = VSet1(x[i * ldx + k]);
      acc[i][0] = VFma(xv, w0, acc[i][0]);
      acc[i][1] = VFma(xv, w1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    if (nr == kNr) {
      if (accumulate) {
        acc[i][0] = VAdd(acc[i][0], VLoad(yi));
        acc[i][1] = VAdd(acc[i][1], VLoad(yi + kLanes));
      }
      VStore(yi, acc[i][0]);
      VStore(yi + kLanes, acc[i][1]);
    } else {
      const int n0 = std::min(nr, kLanes), n1 = nr - n0;
      if (accumulate) {
        acc[i][0] = VAdd(acc[i][0], VLoadN(yi, n0));
        if (n1 > 0) acc[i][1] = VAdd(acc[i][1], VLoadN(yi + kLanes, n1));
      }
      VStoreN(yi, acc[i][0], n0);
      if (n1 > 0) VStoreN(yi + kLanes, acc[i][1], n1);
    }
  }
}

using KernelFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int, bool);

template <int... Is>
constexpr auto MakeKernelTable(std::integer_sequence<int, Is...>) {
  struct Table {
    KernelFn fn[kMr];
  } t{{&MicroKernel<Is + 1>...}};
  return t;
}

// kKernels.fn[mr - 1] handles mr input rows.
constexpr auto kKernels = MakeKernelTable(std::make_integer_sequence<int, kMr>());

// dst[c * ldd + r] = src[r * lds + c] for r, c < 8.
inline void Transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
#if defined(__AVX2__) || defined(__AVX512F__)
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
#else
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) dst[j * ldd + i] = src[i * lds + j];
#endif
}

// Dequantizes weight rows [n0, n0 + nc) x columns [k0, k0 + kc) into panels
// of kNr rows, [k][kNr] each; rows past nc in the last panel are zero. Rows
// are decoded 8 at a time into a small row-major buffer, then transposed in
// 8 x 8 blocks (kc is a multiple of 8, or the whole of a short row).
void PackTile(const WeightMatrix& w, int64_t n0, int64_t nc, int64_t k0, int64_t kc, float* packed) {
  alignas(64) float rows[8 * kKc];
  const int64_t kc8 = kc / 8 * 8;
  for (int64_t r0 = 0; r0 < (nc + kNr - 1) / kNr * kNr; r0 += 8) {
    const int64_t live = std::clamp<int64_t>(nc - r0, 0, 8);
    for (int64_t r = 0; r < live; ++r) DecodeRowRange(w, n0 + r0 + r, k0, kc, rows + r * kc);
    if (live < 8) std::memset(rows + live * kc, 0, (8 - live) * kc * sizeof(float));
    float* panel = packed + (r0 / kNr) * kc * kNr + r0 % kNr;
    for (int64_t k = 0; k < kc8; k += 8) Transpose8x8(rows + k, kc, panel + k * kNr, kNr);
    for (int64_t k = kc8; k < kc; ++k)
      for (int r = 0; r < 8; ++r) panel[k * kNr + r] = rows[r * kc + k];
  }
}

}  // namespace

void Gemm(const float* x, int64_t m_rows, const WeightMatrix& w, float* y) {
  const int64_t n_rows = w.rows, k_len = w.cols;
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
    float* packed = ThreadScratch(ScratchSlot::kTile, kNc * kKc);
    for (int64_t k0 = 0; k0 < k_len; k0 += kKc) {
      const int64_t kc = std::min(kKc, k_len - k0);
      PackTile(w, n0, nc, k0, kc, packed);
      for (int64_t m0 = m_begin; m0 < m_end; m0 += kMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kMr, m_end - m0));
        for (int64_t r0 = 0; r0 < nc; r0 += kNr) {
          const int nr = static_cast<int>(std::min<int64_t>(kNr, nc - r0));
          kKernels.fn[mr - 1](x + m0 * k_len + k0, k_len, packed + r0 * kc, kc, y + m0 * n_rows + n0 + r0,
                              n_rows, nr, k0 > 0);
        }
      }
    }
  }
}

}  // namespace g4::cpu
