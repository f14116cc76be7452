// Device helpers shared by the CUDA kernels: exact float16 / bfloat16
// conversions (ports of core/float16.h, so encodings match the host
// reference bit for bit), warp reductions in one fixed butterfly order, and
// the scalar math every kernel must agree on (GELU).
//
// Every .cu file is compiled with --fmad=false: nvcc never fuses a multiply
// and an add on its own, so each fused multiply-add in a kernel is an
// explicit __fmaf_rn and a formula rounds the same way wherever it is
// inlined (bitwise batch invariance, byte-exact KV encodings).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace g4::cuda {

constexpr int kWarp = 32;

__device__ __forceinline__ float Bf16ToF32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays a quiet NaN (core/float16.h F32ToBf16).
__device__ __forceinline__ uint16_t F32ToBf16(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ __forceinline__ float F16ToF32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float.
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  return __uint_as_float(bits);
}

// Round to nearest even with subnormals, overflow to inf (core/float16.h).
__device__ __forceinline__ uint16_t F32ToF16(float f) {
  const uint32_t bits = __float_as_uint(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t man = bits & 0x7fffffu;
  if (((bits >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | static_cast<uint32_t>(exp) << 10 | man >> 13;
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

// Sum over the 32 lanes, every lane gets the total; the butterfly order is
// fixed, so the result depends only on the 32 inputs.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the
// one definition GeluMul and the fused MoE kernel share (bitwise).
__device__ __forceinline__ float GeluTanh(float x) {
  const float inner = 0.7978845608028654f * __fmaf_rn(0.044715f * x * x, x, x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

}  // namespace g4::cuda
