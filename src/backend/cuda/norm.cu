// RMSNorm as HF Gemma 4 computes it in float32:
//   y = (x * (mean(x^2) + eps)^-1/2) * weight.
// Rows shorter than 1024: one warp per row: lane l sums the squares of
// columns l, l + 32, ... in order, the warp butterfly adds the 32 partials.
// Longer rows: one block per row (RmsNormWideKernel). Either way the order
// depends only on the row length. The row is read completely before any y
// is written, so y may alias x.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/launch.h"

namespace g4::cuda {
namespace {

constexpr int kRowsPerBlock = 8;

__global__ __launch_bounds__(kRowsPerBlock * 32) void RmsNormKernel(const float* __restrict__ x, int64_t ldx,
                                                                     int64_t rows, int64_t d,
                                                                     const float* __restrict__ weight, float eps,
                                                                     float* y, int64_t ldy) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const float* xr = x + r * ldx;
  // The same sequential chain per lane, its loads issued 8 at a time (a
  // decode row is one warp's work: latency, not bandwidth, bounds it).
  float ss = 0.0f;
  int64_t c = lane;
  for (; c + 7 * 32 < d; c += 8 * 32) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = xr[c + 32 * i];
#pragma unroll
    for (int i = 0; i < 8; ++i) ss = __fmaf_rn(v[i], v[i], ss);
  }
  for (; c < d; c += 32) ss = __fmaf_rn(xr[c], xr[c], ss);
  ss = WarpSum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  float* yr = y + r * ldy;
#pragma unroll 8
  for (int64_t c = lane; c < d; c += 32) {
    const float v = xr[c] * inv;
    yr[c] = weight ? v * weight[c] : v;
  }
}

// Rows of at least kWideRow columns (the hidden state; a decode step has
// one or a few): one block of kWideThreads per row. Thread t sums the
// squares of columns t, t + kWideThreads, ... in order (its loads issued
// together), each warp's butterfly adds its 32 partials, and the warps'
// sums are added in warp order: an order fixed by the row length alone.
constexpr int64_t kWideRow = 1024;
constexpr int kWideThreads = 256;

__global__ __launch_bounds__(kWideThreads) void RmsNormWideKernel(const float* __restrict__ x, int64_t ldx, int64_t d,
                                                                  const float* __restrict__ weight, float eps,
                                                                  float* y, int64_t ldy) {
  __shared__ float partial[kWideThreads / 32];
  const int64_t r = blockIdx.x;
  const int t = threadIdx.x;
  const float* xr = x + r * ldx;
  float ss = 0.0f;
  int64_t c = t;
  for (; c + 7 * kWideThreads < d; c += 8 * kWideThreads) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = xr[c + kWideThreads * i];
#pragma unroll
    for (int i = 0; i < 8; ++i) ss = __fmaf_rn(v[i], v[i], ss);
  }
  for (; c < d; c += kWideThreads) ss = __fmaf_rn(xr[c], xr[c], ss);
  ss = WarpSum(ss);
  if ((t & 31) == 0) partial[t >> 5] = ss;
  __syncthreads();  // also: every thread has read its columns before any y is written
  float total = partial[0];
#pragma unroll
  for (int w = 1; w < kWideThreads / 32; ++w) total = total + partial[w];
  const float inv = 1.0f / sqrtf(total / static_cast<float>(d) + eps);
  float* yr = y + r * ldy;
#pragma unroll 8
  for (int64_t c2 = t; c2 < d; c2 += kWideThreads) {
    const float v = xr[c2] * inv;
    yr[c2] = weight ? v * weight[c2] : v;
  }
}

}  // namespace

void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y, cudaStream_t stream) {
  const int64_t ldx = x.rows > 1 ? x.stride : x.cols, ldy = y.rows > 1 ? y.stride : y.cols;
  if (x.cols >= kWideRow) {
    RmsNormWideKernel<<<static_cast<unsigned>(x.rows), kWideThreads, 0, stream>>>(x.f32(), ldx, x.cols, weight, eps,
                                                                                    y.f32(), ldy);
    G4_CUDA_LAUNCHED();
    return;
  }
  const int64_t blocks = (x.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  RmsNormKernel<<<static_cast<unsigned>(blocks), kRowsPerBlock * 32, 0, stream>>>(x.f32(), ldx, x.rows, x.cols,
                                                                                   weight, eps, y.f32(), ldy);
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
