// What matmul.cu shares with the other kernels that multiply by weights
// (moe.cu): the device view of a WeightMatrix and the GEMV / GEMM switch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/weight_access.cuh"
#include "io/weight_matrix.h"

namespace g4::cuda {

// Inputs with at most this many rows take the dense matrix-vector kernel.
constexpr int64_t kGemvMaxRows = 64;

// The kernel view of a placed weight matrix, and its WFmt.
DevWeight MakeDevWeight(const WeightMatrix& w);
int WeightFormat(const WeightMatrix& w);

}  // namespace g4::cuda
