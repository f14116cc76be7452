// A float as three bf16 terms, the operands the tensor-core kernels give
// mma.sync for f32 values (paged_attention_mma.cu). Internal to
// backend/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace g4::cuda {

// x as hi + mid + lo, three bf16 terms (round to nearest each): x - hi and
// (x - hi) - mid are exact in f32, so the terms carry 24 bits of x (about
// 2^-24 relative). Products of a term and a bf16 value are exact in f32.
struct Bf16Terms {
  __nv_bfloat16 hi, mid, lo;
};
__device__ __forceinline__ Bf16Terms SplitBf16(float x) {
  Bf16Terms t;
  t.hi = __float2bfloat16_rn(x);
  const float r = x - __bfloat162float(t.hi);
  t.mid = __float2bfloat16_rn(r);
  t.lo = __float2bfloat16_rn(r - __bfloat162float(t.mid));
  return t;
}

// Two bf16 values in one word, `low` in the low half (the fragments' order).
__device__ __forceinline__ uint32_t PackBf16(__nv_bfloat16 low, __nv_bfloat16 high) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(low)) | (static_cast<uint32_t>(__bfloat16_as_ushort(high)) << 16);
}

}  // namespace g4::cuda
