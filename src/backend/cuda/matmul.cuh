// What matmul.cu shares with the other kernels that multiply by weights
// (moe.cu): the device view of a WeightMatrix and the GEMV / GEMM switch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/weight_access.cuh"
#include "io/weight_matrix.h"

namespace g4::cuda {

// Inputs with at most this many rows take the matrix-vector kernel.
constexpr int64_t kGemvMaxRows = 64;

// The kernel view of a placed weight matrix, and its WFmt.
DevWeight MakeDevWeight(const WeightMatrix& w);
int WeightFormat(const WeightMatrix& w);

// gemv_one.cu: y = x W^T for 1..kGemvMaxRows input rows (x rows ldx apart,
// y rows ldy apart) and affine weights, in the canonical order; false
// (nothing queued) where it does not apply (dense weights, one row longer
// than its shared-memory stage).
bool GemvFewRows(const DevWeight& w, int fmt, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy,
                 cudaStream_t stream);

}  // namespace g4::cuda
