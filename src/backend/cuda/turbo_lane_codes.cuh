// A lane's run of TurboQuant codes read as words: the D32 consecutive
// B-bit codes of one lane's elements, loaded from shared memory in 4-, 8-
// or 16-byte words and taken apart in registers. Unpack (kv_codec.cuh)
// reads each element on its own: one or two byte loads, a branch on the
// straddle and 64-bit index arithmetic per element, a chain the compiler
// cannot overlap; at 32k context it kept the streaming split kernel about
// 15x off the memory bandwidth. The values are Unpack's, so every decoded
// key and value, and every float operation on them, is unchanged.
//
// Contract: `stream` (a code array's first byte) is 4-byte aligned (16 for
// the 16-byte loads of whole-16 runs) and the lane's first element e0 is a
// multiple of D32, so the run starts on a byte; the word after the run may
// be read (its bytes ignored), so the memory 4 bytes past the run must be
// readable (a record part's scales follow its codes).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kv_codec.cuh"

namespace g4::cuda {

template <int D32, int B>
struct LaneCodes {
  static_assert(B >= 1 && B <= 8 && (D32 * B) % 8 == 0, "a run of whole bytes");
  static constexpr int kBytes = D32 * B / 8;      // the run
  static constexpr int kWords = (kBytes + 3) / 4;  // its 32-bit words, shifted to bit 0
  uint32_t u[kWords];

  __device__ __forceinline__ void Load(const uint8_t* stream, int e0) {
    const int start = e0 / D32 * kBytes;  // the run's first byte
    if constexpr (kBytes % 16 == 0) {
      const uint4* p = reinterpret_cast<const uint4*>(stream + start);
#pragma unroll
      for (int k = 0; k < kWords / 4; ++k) {
        const uint4 v = p[k];
        u[4 * k] = v.x, u[4 * k + 1] = v.y, u[4 * k + 2] = v.z, u[4 * k + 3] = v.w;
      }
    } else if constexpr (kBytes % 8 == 0) {
      const uint2* p = reinterpret_cast<const uint2*>(stream + start);
#pragma unroll
      for (int k = 0; k < kWords / 2; ++k) {
        const uint2 v = p[k];
        u[2 * k] = v.x, u[2 * k + 1] = v.y;
      }
    } else if constexpr (kBytes % 4 == 0) {
      const uint32_t* p = reinterpret_cast<const uint32_t*>(stream + start);
#pragma unroll
      for (int k = 0; k < kWords; ++k) u[k] = p[k];
    } else {
      // The run starts inside a word: the covering words, shifted down.
      const uint32_t* p = reinterpret_cast<const uint32_t*>(stream + (start & ~3));
      const int sh = (start & 3) * 8;
      uint32_t w[kWords + 1];
#pragma unroll
      for (int k = 0; k <= kWords; ++k) w[k] = p[k];
#pragma unroll
      for (int k = 0; k < kWords; ++k) u[k] = __funnelshift_r(w[k], w[k + 1], sh);
    }
  }

  // Code i of the run (0 <= i < D32; a constant once the caller's loop is
  // unrolled, so the words stay in registers).
  __device__ __forceinline__ uint32_t At(int i) const {
    const int bit = i * B, k = bit / 32, off = bit % 32;
    uint32_t x;
    if (off + B <= 32) {
      x = u[k] >> off;
    } else {
      x = __funnelshift_r(u[k], u[k + 1 < kWords ? k + 1 : k], off);
    }
    return x & ((1u << B) - 1);
  }
};

// Elements e0 .. e0 + D32 - 1 (one group of 32's share) of a TurboQuant
// key: TurboKeyCode's value (8-bit codes signed), then (code + zero) * step
// as DecodeKey.
template <int D32, int B>
__device__ __forceinline__ void TurboKeyRun(const DevKvFormat& f, const uint8_t* part, int e0, float (&out)[D32]) {
  const int g = e0 / 32;
  const float s = TurboKeyStep(f, part, g), z = TurboKeyZero(f, part, g);
  LaneCodes<D32, B> c;
  c.Load(part + f.k_codes, e0);
#pragma unroll
  for (int i = 0; i < D32; ++i) {
    const uint32_t code = c.At(i);
    const float q = B == 8 ? static_cast<float>(static_cast<int8_t>(code)) : static_cast<float>(code);
    out[i] = (q + z) * s;
  }
}

// The same elements of a TurboQuant value: centroid[code] * scale as
// DecodeValue (`centroids` the store's codebook, in shared memory here).
template <int D32, int B>
__device__ __forceinline__ void TurboValueRun(const DevKvFormat& f, const uint8_t* part, int e0,
                                              const float* centroids, float (&out)[D32]) {
  const float r = TurboValueScale(f, part, e0 / 32);
  LaneCodes<D32, B> c;
  c.Load(part + f.v_codes, e0);
#pragma unroll
  for (int i = 0; i < D32; ++i) out[i] = centroids[c.At(i)] * r;
}

// The bit widths that have runs (turbo keys 2, 4, 5 or 8 bits, values 2, 3,
// 4, 5 or 8: KvCodecSpec): f.template operator()<B>() for the store's
// width B, or <0>() for any other width, which the caller decodes element
// by element. One switch per width list, for the per-key helpers below and
// the streaming kernel's key loops alike.
template <typename F>
__device__ __forceinline__ void WithKeyRunWidth(int bits, F&& f) {
  switch (bits) {
    case 2: return f.template operator()<2>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    case 8: return f.template operator()<8>();
    default: return f.template operator()<0>();
  }
}
template <typename F>
__device__ __forceinline__ void WithValueRunWidth(int bits, F&& f) {
  switch (bits) {
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    case 8: return f.template operator()<8>();
    default: return f.template operator()<0>();
  }
}

// One key's or value's run at the store's width; false for a width without
// runs.
template <int D32>
__device__ __forceinline__ bool TurboKeyRunAny(const DevKvFormat& f, const uint8_t* part, int e0, float (&out)[D32]) {
  bool ran = false;
  WithKeyRunWidth(f.key_bits, [&]<int B>() {
    if constexpr (B != 0) TurboKeyRun<D32, B>(f, part, e0, out), ran = true;
  });
  return ran;
}
template <int D32>
__device__ __forceinline__ bool TurboValueRunAny(const DevKvFormat& f, const uint8_t* part, int e0,
                                                 const float* centroids, float (&out)[D32]) {
  bool ran = false;
  WithValueRunWidth(f.value_bits, [&]<int B>() {
    if constexpr (B != 0) TurboValueRun<D32, B>(f, part, e0, centroids, out), ran = true;
  });
  return ran;
}

}  // namespace g4::cuda
