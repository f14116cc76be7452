// MatMul dispatch: few input rows take the matrix-vector kernels, more take
// the blocked GEMM; both in the canonical order of kernels.h, so the switch
// never changes a row's bits.
#include "backend/cpu/isa.h"
#include "backend/cpu/kernels.h"
#include "core/check.h"

G4_CPU_BEGIN

void CheckWeight(const WeightMatrix& w) {
  if (w.is_affine()) {
    G4_CHECK_MSG(w.bits == 2 || w.bits == 3 || w.bits == 4 || w.bits == 5 || w.bits == 6 || w.bits == 8,
                 "[cpu] affine bit width must be 2, 3, 4, 5, 6 or 8");
    G4_CHECK_MSG(w.group_size == 32 || w.group_size == 64 || w.group_size == 128,
                 "[cpu] affine group size must be 32, 64 or 128");
    G4_CHECK_MSG(w.cols % w.group_size == 0, "[cpu] affine columns must be whole groups");
    G4_CHECK_MSG(
        w.scale_dtype == DType::kBF16 || w.scale_dtype == DType::kF16 || w.scale_dtype == DType::kF32,
        "[cpu] affine scales must be BF16, F16 or F32");
    G4_CHECK(w.rows == 0 || (w.codes && w.scales && w.biases));
  } else {
    G4_CHECK_MSG(w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16,
                 "[cpu] dense weights must be F32, BF16 or F16");
    G4_CHECK(w.rows == 0 || w.cols == 0 || w.data);
  }
  G4_CHECK(w.rows >= 0 && w.cols >= 0);
}

void MatMul(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  CheckWeight(w);
  G4_CHECK(m_rows >= 0 && ldx >= w.cols && ldy >= w.rows);
  if (m_rows == 0 || w.rows == 0) return;
  if (m_rows <= kGemvMaxRows) {
    if (w.is_affine()) {
      GemvAffine(x, ldx, m_rows, w, y, ldy);
    } else {
      GemvDense(x, ldx, m_rows, w, y, ldy);
    }
  } else if (w.is_affine()) {
    GemmAffine(x, ldx, m_rows, w, y, ldy);
  } else {
    Gemm(x, ldx, m_rows, w, y, ldy);
  }
}

G4_CPU_END
