// Entry points of the CPU kernels, one family per .cc file; CpuOps
// (cpu_ops.cc) validates shapes and dispatches here. All take float32
// activations and parallelize internally over the worker team
// (thread_pool.h, parallel.h).
#pragma once

#include <cstdint>

#include "backend/cpu/isa.h"
#include "backend/ops.h"
#include "io/weight_matrix.h"

G4_CPU_BEGIN

// Inputs with at most this many rows take the matrix-vector kernels (weights
// streamed once, codes unpacked once for all rows); more rows take the
// blocked GEMM, which unpacks weight tiles once and reuses them.
//
// Both paths compute every output y[i, n] in one canonical order, so a row's
// result is bit-identical whatever m_rows is and wherever the row sits in
// the batch (chunked prefill == single pass == decode):
//  - affine weights: the integer scheme of affine_int8.h (input rows
//    quantized to int8 per weight group, exact integer group sums, then one
//    fixed float sequence per output); the same bits on every kernel
//    variant;
//  - dense weights: the weight row as float32 (exact conversion); one
//    vector accumulator acc (kLanes lanes), acc = fma(x[k..k+kLanes),
//    w[k..k+kLanes), acc) for k = 0, kLanes, 2 kLanes, ... in order (a short
//    last chunk has x masked to zero and w zero-padded); then
//    y = VReduceAdd(acc), the one fixed horizontal tree of simd.h. This
//    order depends on the variant's vector width, not on the batch.
constexpr int64_t kGemvMaxRows = 4;

// matmul.cc: y = x W^T for any m_rows (x rows ldx floats apart, y rows ldy),
// through the GEMV or GEMM path; checks the weight format first. y may not
// overlap x.
void MatMul(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy);
// G4_CHECK-fails on a weight format the kernels do not support.
void CheckWeight(const WeightMatrix& w);

// matmul_dense.cc / matmul_affine.cc: y = x W^T for m_rows <= kGemvMaxRows.
// x rows are ldx floats apart, y rows ldy floats apart.
void GemvDense(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy);
void GemvAffine(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy);
// gemm_affine.cc: y = x W^T for any m_rows, affine weights.
void GemmAffine(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy);
// gemm.cc: y = x W^T for any m_rows, dense weights.
void Gemm(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy);

// weight_decode.cc: columns [col, col + count) of `row` as float32. For affine
// weights col and count are multiples of the group size (or count reaches
// the end of the row).
void DecodeRowRange(const WeightMatrix& w, int64_t row, int64_t col, int64_t count, float* out);
// base[first, first + n) of dtype t (F32, BF16 or F16) as float32.
void ConvertToFloat(DType t, const void* base, int64_t first, int64_t n, float* out);

// embed.cc: out rows ldo floats apart.
void Embed(const WeightMatrix& table, const int32_t* ids, int64_t n, float scale, float* out, int64_t ldo);
// norm.cc
void RmsNorm(const float* x, int64_t ldx, int64_t rows, int64_t d, const float* weight, float eps, float* y,
             int64_t ldy);
// rope.cc: x rows (heads * head_dim values) ldx floats apart.
void Rope(float* x, int64_t ldx, int64_t tokens, int heads, int head_dim, const int32_t* positions,
          const float* inv_freq);
// elementwise.cc: F32 views of one shape (any strides).
void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out);
void Add(const TensorView& a, const TensorView& b, const TensorView& y);
void Scale(const TensorView& x, float s);
void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y);
void Softcap(const TensorView& x, float cap);
// moe_experts.cc
void MoeExperts(const MoeExpertsArgs& args);
// sample_rows.cc
void SampleRows(const SampleArgs& args);

G4_CPU_END
