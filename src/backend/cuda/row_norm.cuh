// The float sum of squares behind RMSNorm on the GPU, shared by every
// kernel that normalizes a row (norm.cu, head_norm_rope.cu) so that a fused
// kernel's bits are the plain RmsNorm's.
#pragma once

#include <cstdint>

#include "backend/cuda/device_common.cuh"

namespace g4::cuda {

// Thread t of the N that share a row (N = 32: a warp; N = kWideThreads: a
// block) chains the squares of columns t, t + N, ... in order, its loads
// issued 8 at a time (a decode row is latency-bound).
template <int N>
__device__ __forceinline__ float RowSumSquares(const float* __restrict__ xr, int64_t d, int t) {
  float ss = 0.0f;
  int64_t c = t;
  for (; c + 7 * N < d; c += 8 * N) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = xr[c + N * i];
#pragma unroll
    for (int i = 0; i < 8; ++i) ss = __fmaf_rn(v[i], v[i], ss);
  }
  for (; c < d; c += N) ss = __fmaf_rn(xr[c], xr[c], ss);
  return ss;
}

// The row's total from the threads' chains: the warp butterfly, then (a
// block) the warp sums in warp order. `partial` (block: N / 32 floats) is
// used once per call site. Ends with a barrier for a block.
template <int N>
__device__ __forceinline__ float RowTotal(float ss, float* partial) {
  ss = WarpSum(ss);
  if constexpr (N == 32) {
    return ss;
  } else {
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = partial[0];
#pragma unroll
    for (int w = 1; w < N / 32; ++w) total = total + partial[w];
    return total;
  }
}

__device__ __forceinline__ float InvRms(float total, int64_t d, float eps) {
  return 1.0f / sqrtf(total / static_cast<float>(d) + eps);
}

}  // namespace g4::cuda
