// Step 1 of the integer scheme (affine_int8.cuh): one weight group of an
// input row quantized by one warp. Every kernel that quantizes an input
// (QuantizeRows; AddNorm and the attention merge preparing the next
// product's input) calls QuantizeGroup, so their bits agree. Internal to
// backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_common.cuh"

namespace g4::cuda {

// Where quantized column c of a row goes (affine_int8.cuh).
__device__ __forceinline__ int64_t QPos(int bits, int64_t c) {
  if (bits == 4) {
    const int o = static_cast<int>(c & 7);
    return c - o + ((o & 1) ? 4 + (o >> 1) : (o >> 1));
  }
  if (bits == 2) {
    const int o = static_cast<int>(c & 15);
    return c - o + (o & 3) * 4 + (o >> 2);
  }
  return c;
}

// x86 cvtps2dq in round-to-nearest-even: NaN and out-of-range give INT_MIN.
__device__ __forceinline__ int CvtLikeX86(float v) {
  return fabsf(v) < 2147483648.0f ? __float2int_rn(v) : static_cast<int>(0x80000000u);
}

// Group g of one input row (its `group` floats at xg; gated: gelu_tanh(xg)
// * ug, elementwise GeluMul's bits), by one warp: lane l takes elements l,
// l + 32, ...; codes to qrow (QPos order), d and xs to *d_out and *xs_out.
// xg (and ug) may be global or shared memory.
__device__ __forceinline__ void QuantizeGroup(const float* xg, const float* ug, int group, int bits,
                                              int64_t g, int lane, int8_t* qrow, float* d_out,
                                              float* xs_out) {
  const int per = group / 32;  // 1, 2 or 4
  float v[4];
  uint32_t amax = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = j >= per ? 0.0f : ug ? GeluTanh(xg[j * 32 + lane]) * ug[j * 32 + lane] : xg[j * 32 + lane];
    amax = max(amax, __float_as_uint(v[j]) & 0x7fffffffu);
  }
  amax = __reduce_max_sync(0xffffffffu, amax);
  const float a = __uint_as_float(amax);
  const bool finite = amax < 0x7f800000u;
  const float d = finite ? __fdiv_rn(a, 127.0f) : __uint_as_float(0x7fc00000u);
  const float inv = finite && amax != 0 ? __fdiv_rn(127.0f, a) : 0.0f;
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (j >= per) break;
    const int qi = min(127, max(-127, CvtLikeX86(__fmul_rn(v[j], inv))));
    sum += qi;
    qrow[QPos(bits, g * group + j * 32 + lane)] = static_cast<int8_t>(qi);
  }
  sum = __reduce_add_sync(0xffffffffu, sum);
  if (lane == 0) {
    *d_out = d;
    *xs_out = __fmul_rn(__int2float_rn(sum), d);
  }
}

}  // namespace g4::cuda
