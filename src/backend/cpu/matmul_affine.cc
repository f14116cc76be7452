// Matrix-vector products over MLX affine-quantized weights (decode). Each
// weight row is read once, straight from its packed codes; per group the
// kernel accumulates, as MLX does,
//   y += scale * sum(x * q) + bias * sum(x),
// with sum(x) per group computed once per input row, so the bias costs one
// short dot product per weight row instead of a multiply per element.
#include "backend/cpu/affine_codes.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/scratch.h"
#include "core/check.h"

namespace g4::cpu {
namespace {

constexpr int64_t kParallelMinWords = 1 << 12;

// Adds scale * sum(x * q) over one group (CPG chunks) to tot[m] for each of
// the M input rows; advances words past the group.
template <int B, int M, int CPG>
inline void GroupDot(const uint32_t*& words, const float* xp, int64_t ldx, float scale, VF* tot) {
  // Two chains per input row so consecutive FMAs do not wait on each other.
  VF acc[M][2];
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = VZero();
#pragma GCC unroll 4
  for (int c = 0; c < CPG; ++c) {
    VF q[kChunkVecs];
    LoadChunkDotOrder<B>(words, q);
    words += B;
    for (int m = 0; m < M; ++m)
      for (int v = 0; v < kChunkVecs; ++v)
        acc[m][v & 1] = VFma(VLoad(xp + m * ldx + c * kChunk + v * kLanes), q[v], acc[m][v & 1]);
  }
  const VF sv = VSet1(scale);
  for (int m = 0; m < M; ++m) tot[m] = VFma(VAdd(acc[m][0], acc[m][1]), sv, tot[m]);
}

// How far ahead of the kernel the code stream is prefetched (rows are
// contiguous, so this runs on into the next rows). The hardware prefetcher
// alone does not run far enough ahead while the core is busy unpacking;
// 2 KiB measured best for 4- and 8-bit on Sapphire Rapids.
constexpr int64_t kPrefetchBytes = 2048;

template <int B, int M, int CPG>
void GemvAffineRows(const float* xp, const float* xsum, const WeightMatrix& w, float* y) {
  const int64_t n_rows = w.rows, k_len = w.cols;
  const int64_t gpr = w.groups_per_row(), wpr = w.words_per_row();
  const int64_t scale_bytes = gpr * static_cast<int64_t>(DTypeSize(w.scale_dtype));
  constexpr int64_t kGroupCols = CPG * kChunk;
#pragma omp parallel if (n_rows * wpr >= kParallelMinWords)
  {
    float* s = ThreadScratch(ScratchSlot::kRowScales, gpr);
    float* b = ThreadScratch(ScratchSlot::kRowBiases, gpr);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < n_rows; ++n) {
      if (n + 2 < n_rows) {
        PrefetchBytes(static_cast<const char*>(w.scales) + (n + 2) * scale_bytes, scale_bytes);
        PrefetchBytes(static_cast<const char*>(w.biases) + (n + 2) * scale_bytes, scale_bytes);
      }
      ConvertToFloat(w.scale_dtype, w.scales, n * gpr, gpr, s);
      ConvertToFloat(w.scale_dtype, w.biases, n * gpr, gpr, b);
      const uint32_t* words = w.codes + n * wpr;
      // Even and odd groups accumulate separately, halving the loop-carried chain.
      VF tot[2][M];
      for (int m = 0; m < M; ++m) tot[0][m] = tot[1][m] = VZero();
      int64_t g = 0;
      for (; g + 2 <= gpr; g += 2) {
        PrefetchBytes(reinterpret_cast<const char*>(words) + kPrefetchBytes, 2 * CPG * B * 4);
        GroupDot<B, M, CPG>(words, xp + g * kGroupCols, k_len, s[g], tot[0]);
        GroupDot<B, M, CPG>(words, xp + (g + 1) * kGroupCols, k_len, s[g + 1], tot[1]);
      }
      if (g < gpr) GroupDot<B, M, CPG>(words, xp + g * kGroupCols, k_len, s[g], tot[0]);
      for (int m = 0; m < M; ++m)
        y[m * n_rows + n] = VReduceAdd(VAdd(tot[0][m], tot[1][m])) + VDot(b, xsum + m * gpr, gpr);
    }
  }
}

template <int B, int M>
void GemvAffineRowsAnyGroup(const float* xp, const float* xsum, const WeightMatrix& w, float* y) {
  switch (w.group_size) {
    case 32: return GemvAffineRows<B, M, 1>(xp, xsum, w, y);
    case 64: return GemvAffineRows<B, M, 2>(xp, xsum, w, y);
    case 128: return GemvAffineRows<B, M, 4>(xp, xsum, w, y);
    default: G4_CHECK_MSG(false, "[cpu] GemvAffine: unsupported group size");
  }
}

template <int B>
void GemvAffineBits(const float* x, int64_t m_rows, const WeightMatrix& w, float* y) {
  const int64_t k_len = w.cols, gpr = w.groups_per_row(), gs = w.group_size;
  float* xsum = ThreadScratch(ScratchSlot::kInputSum, m_rows * gpr);
  for (int64_t m = 0; m < m_rows; ++m) {
    for (int64_t g = 0; g < gpr; ++g) {
      const float* xg = x + m * k_len + g * gs;
      VF acc = VZero();
      for (int64_t c = 0; c < gs; c += kLanes) acc = VAdd(acc, VLoad(xg + c));
      xsum[m * gpr + g] = VReduceAdd(acc);
    }
  }
  const float* xp = x;
  if constexpr (DotOrderPermuted(B)) {
    float* buf = ThreadScratch(ScratchSlot::kInput, m_rows * k_len);
    for (int64_t m = 0; m < m_rows; ++m) PermuteForDot4(x + m * k_len, k_len, buf + m * k_len);
    xp = buf;
  }
  switch (m_rows) {
    case 1: return GemvAffineRowsAnyGroup<B, 1>(xp, xsum, w, y);
    case 2: return GemvAffineRowsAnyGroup<B, 2>(xp, xsum, w, y);
    case 3: return GemvAffineRowsAnyGroup<B, 3>(xp, xsum, w, y);
    case 4: return GemvAffineRowsAnyGroup<B, 4>(xp, xsum, w, y);
    default: G4_CHECK_MSG(false, "[cpu] GemvAffine: too many input rows");
  }
}

}  // namespace

void GemvAffine(const float* x, int64_t m_rows, const WeightMatrix& w, float* y) {
  static_assert(kGemvMaxRows == 4);
  switch (w.bits) {
    case 2: return GemvAffineBits<2>(x, m_rows, w, y);
    case 3: return GemvAffineBits<3>(x, m_rows, w, y);
    case 4: return GemvAffineBits<4>(x, m_rows, w, y);
    case 5: return GemvAffineBits<5>(x, m_rows, w, y);
    case 6: return GemvAffineBits<6>(x, m_rows, w, y);
    case 8: return GemvAffineBits<8>(x, m_rows, w, y);
    default: G4_CHECK_MSG(false, "[cpu] GemvAffine: unsupported bit width");
  }
}

}  // namespace g4::cpu
