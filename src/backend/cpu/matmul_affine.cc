// Matrix-vector products over MLX affine-quantized weights (decode). Each
// weight row is read once, straight from its packed codes, and dequantized
// in registers to exactly the values the GEMM decodes into its tiles,
// fma(q, scale, bias); the dot products then follow the canonical order of
// kernels.h, so a row's output does not depend on the path or the batch.
// NR weight rows are in flight at once: their independent accumulator
// chains hide the FMA latency, and all input rows share each unpack.
#include "backend/cpu/affine_codes.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/scratch.h"
#include "core/check.h"

namespace g4::cpu {
namespace {

constexpr int64_t kParallelMinWords = 1 << 12;

// Each code stream is prefetched one block of NR rows ahead, at the same
// column: the hardware prefetcher alone does not run far enough ahead of NR
// interleaved streams while the core is busy unpacking.

// y[m, r] for m < M and the NR weight rows whose codes start at `codes`
// (row stride wpr words) and whose scales / biases (as float, gpr per row)
// are s / b.
template <int B, int M, int NR, int CPG>
void AffineBlock(const float* x, int64_t ldx, const uint32_t* codes, int64_t wpr, const float* s,
                 const float* b, int64_t gpr, float* y, int64_t ldy) {
  VF acc[M][NR];
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = VZero();
  const uint32_t* words[NR];
  for (int r = 0; r < NR; ++r) words[r] = codes + r * wpr;
  for (int64_t g = 0; g < gpr; ++g) {
    VF vs[NR], vb[NR];
    for (int r = 0; r < NR; ++r) {
      vs[r] = VSet1(s[r * gpr + g]);
      vb[r] = VSet1(b[r * gpr + g]);
      PrefetchBytes(words[r] + NR * wpr, CPG * B * 4);
    }
    const float* xg = x + g * CPG * kChunk;
#pragma GCC unroll 4
    for (int c = 0; c < CPG; ++c) {
      for (int r = 0; r < NR; ++r) {
        VF q[kChunkVecs];
        LoadChunkNatural<B>(words[r], q);
        words[r] += B;
        for (int v = 0; v < kChunkVecs; ++v) {
          const VF wv = VFma(q[v], vs[r], vb[r]);
          for (int m = 0; m < M; ++m)
            acc[m][r] = VFma(VLoad(xg + m * ldx + c * kChunk + v * kLanes), wv, acc[m][r]);
        }
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < NR; ++r) y[m * ldy + r] = VReduceAdd(acc[m][r]);
}

template <int B, int M, int CPG>
void GemvAffineRows(const float* x, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy) {
  // M x NR accumulators plus the per-row scale and bias vectors.
  constexpr int kNr = (kLanes == 16 || M == 1) ? 4 : 2;
  const int64_t n_rows = w.rows;
  const int64_t gpr = w.groups_per_row(), wpr = w.words_per_row();
  const int64_t scale_bytes = kNr * gpr * static_cast<int64_t>(DTypeSize(w.scale_dtype));
  const int64_t blocks = n_rows / kNr;
#pragma omp parallel if (n_rows * wpr >= kParallelMinWords)
  {
    float* s = ThreadScratch(ScratchSlot::kRowScales, kNr * gpr);
    float* b = ThreadScratch(ScratchSlot::kRowBiases, kNr * gpr);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t n = blk * kNr;
      if (blk + 1 < blocks) {
        PrefetchBytes(static_cast<const char*>(w.scales) + (blk + 1) * scale_bytes, scale_bytes);
        PrefetchBytes(static_cast<const char*>(w.biases) + (blk + 1) * scale_bytes, scale_bytes);
      }
      ConvertToFloat(w.scale_dtype, w.scales, n * gpr, kNr * gpr, s);
      ConvertToFloat(w.scale_dtype, w.biases, n * gpr, kNr * gpr, b);
      AffineBlock<B, M, kNr, CPG>(x, ldx, w.codes + n * wpr, wpr, s, b, gpr, y + n, ldy);
    }
#pragma omp single
    for (int64_t n = blocks * kNr; n < n_rows; ++n) {
      ConvertToFloat(w.scale_dtype, w.scales, n * gpr, gpr, s);
      ConvertToFloat(w.scale_dtype, w.biases, n * gpr, gpr, b);
      AffineBlock<B, M, 1, CPG>(x, ldx, w.codes + n * wpr, wpr, s, b, gpr, y + n, ldy);
    }
  }
}

template <int B, int M>
void GemvAffineRowsAnyGroup(const float* x, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy) {
  switch (w.group_size) {
    case 32: return GemvAffineRows<B, M, 1>(x, ldx, w, y, ldy);
    case 64: return GemvAffineRows<B, M, 2>(x, ldx, w, y, ldy);
    case 128: return GemvAffineRows<B, M, 4>(x, ldx, w, y, ldy);
    default: G4_CHECK_MSG(false, "[cpu] GemvAffine: unsupported group size");
  }
}

template <int B>
void GemvAffineBits(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  switch (m_rows) {
    case 1: return GemvAffineRowsAnyGroup<B, 1>(x, ldx, w, y, ldy);
    case 2: return GemvAffineRowsAnyGroup<B, 2>(x, ldx, w, y, ldy);
    case 3: return GemvAffineRowsAnyGroup<B, 3>(x, ldx, w, y, ldy);
    case 4: return GemvAffineRowsAnyGroup<B, 4>(x, ldx, w, y, ldy);
    default: G4_CHECK_MSG(false, "[cpu] GemvAffine: too many input rows");
  }
}

}  // namespace

void GemvAffine(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  static_assert(kGemvMaxRows == 4);
  switch (w.bits) {
    case 2: return GemvAffineBits<2>(x, ldx, m_rows, w, y, ldy);
    case 3: return GemvAffineBits<3>(x, ldx, m_rows, w, y, ldy);
    case 4: return GemvAffineBits<4>(x, ldx, m_rows, w, y, ldy);
    case 5: return GemvAffineBits<5>(x, ldx, m_rows, w, y, ldy);
    case 6: return GemvAffineBits<6>(x, ldx, m_rows, w, y, ldy);
    case 8: return GemvAffineBits<8>(x, ldx, m_rows, w, y, ldy);
    default: G4_CHECK_MSG(false, "[cpu] GemvAffine: unsupported bit width");
  }
}

}  // namespace g4::cpu
