// The KV record codecs on the device (backend/kv_record.h formats), written
// to give the host reference's bytes and values exactly: the same float
// operations in the same order (kv_affine_codec.cc, kv_turbo_codec.cc; all
// .cu files build with --fmad=false, and the host reference has no fused
// operations in these paths), the same fp16 rounding (device_common.cuh),
// the same LSB-first packing.
//
// Decoding is per element (attention and recode read single values);
// encoding is per group by one thread, in the reference's loop order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "backend/kv_record.h"

namespace g4::cuda {

enum KvKind : int { kKvPlain = 0, kKvAffine = 1, kKvTurbo = 2 };

struct DevKvFormat {
  int kind = kKvPlain;
  int plain_bytes = 4;  // plain: 4 (f32), 2 (bf16 or f16)
  bool plain_bf16 = false;
  int bits = 0, group = 0;           // affine
  int key_bits = 0, value_bits = 0;  // turbo
  int heads = 0, head_dim = 0;
  int64_t record_bytes = 0;
  int64_t k_codes = 0, k_scales = 0, k_biases = 0, v_codes = 0, v_scales = 0, v_biases = 0;
  __host__ __device__ int width() const { return heads * head_dim; }
};

inline DevKvFormat MakeDevKvFormat(const KvRecordFormat& f) {
  DevKvFormat d;
  d.kind = f.spec.kind == KvCodecSpec::Kind::kPlain ? kKvPlain
           : f.spec.kind == KvCodecSpec::Kind::kAffine ? kKvAffine
                                                       : kKvTurbo;
  d.plain_bytes = f.spec.plain_dtype == DType::kF32 ? 4 : 2;
  d.plain_bf16 = f.spec.plain_dtype == DType::kBF16;
  d.bits = f.spec.bits;
  d.group = f.spec.group;
  d.key_bits = f.spec.key_bits;
  d.value_bits = f.spec.value_bits;
  d.heads = f.num_kv_heads;
  d.head_dim = f.head_dim;
  d.record_bytes = f.record_bytes;
  d.k_codes = f.k_codes, d.k_scales = f.k_scales, d.k_biases = f.k_biases;
  d.v_codes = f.v_codes, d.v_scales = f.v_scales, d.v_biases = f.v_biases;
  return d;
}

__device__ __forceinline__ uint16_t Load16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
__device__ __forceinline__ void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// Value i of a LSB-first `bits`-wide stream (bits <= 8; reads at most the
// byte after the value's first, which always lies inside the record).
__device__ __forceinline__ uint32_t Unpack(const uint8_t* p, int64_t i, int bits) {
  if (bits == 8) return p[i];
  const int64_t bit = i * bits;
  const int sh = static_cast<int>(bit & 7);
  uint32_t v = p[bit >> 3] >> sh;
  if (sh + bits > 8) v |= static_cast<uint32_t>(p[(bit >> 3) + 1]) << (8 - sh);
  return v & ((1u << bits) - 1);
}

// TurboQuant pieces, per group g of 32 elements and element e: a key is
// (code + zero) * step, a value centroid[code] * scale (rotated domain).
// DecodeKey / DecodeValue take them per element; a reader whose elements
// share a group reads the group's step, zero or scale once.
__device__ __forceinline__ float TurboKeyStep(const DevKvFormat& f, const uint8_t* rec, int64_t g) {
  return F16ToF32(Load16(rec + f.k_scales + 2 * g));
}
__device__ __forceinline__ float TurboKeyZero(const DevKvFormat& f, const uint8_t* rec, int64_t g) {
  return F16ToF32(Load16(rec + f.k_biases + 2 * g));
}
__device__ __forceinline__ float TurboKeyCode(const DevKvFormat& f, const uint8_t* rec, int64_t e) {
  return f.key_bits == 8 ? static_cast<float>(static_cast<int8_t>(rec[f.k_codes + e]))
                         : static_cast<float>(Unpack(rec + f.k_codes, e, f.key_bits));
}
__device__ __forceinline__ float TurboValueScale(const DevKvFormat& f, const uint8_t* rec, int64_t g) {
  return F16ToF32(Load16(rec + f.v_scales + 2 * g));
}
__device__ __forceinline__ float TurboValueCentroid(const DevKvFormat& f, const uint8_t* rec, int64_t e,
                                                    const float* centroids) {
  return centroids[Unpack(rec + f.v_codes, e, f.value_bits)];
}

// A plain 2-byte store's code for x (bf16 or f16, as the store says):
// what KvWrite writes and DecodeKey / DecodeValue read back.
__device__ __forceinline__ uint16_t PlainCode(const DevKvFormat& f, float x) {
  return f.plain_bf16 ? F32ToBf16(x) : F32ToF16(x);
}

// Element e (0 .. width) of a record's K, or of its V (turbo: left in the
// rotated domain; `centroids` the store's value codebook).
__device__ __forceinline__ float DecodeKey(const DevKvFormat& f, const uint8_t* rec, int64_t e) {
  if (f.kind == kKvPlain) {
    const uint8_t* p = rec + f.k_codes;
    if (f.plain_bytes == 4) return reinterpret_cast<const float*>(p)[e];
    const uint16_t h = reinterpret_cast<const uint16_t*>(p)[e];
    return f.plain_bf16 ? Bf16ToF32(h) : F16ToF32(h);
  }
  if (f.kind == kKvAffine) {
    const float q = static_cast<float>(Unpack(rec + f.k_codes, e, f.bits));
    const int64_t g = e / f.group;
    return __fmaf_rn(F16ToF32(Load16(rec + f.k_scales + 2 * g)), q, F16ToF32(Load16(rec + f.k_biases + 2 * g)));
  }
  const int64_t g = e / 32;
  const float s = TurboKeyStep(f, rec, g), z = TurboKeyZero(f, rec, g);
  return (TurboKeyCode(f, rec, e) + z) * s;
}

__device__ __forceinline__ float DecodeValue(const DevKvFormat& f, const uint8_t* rec, int64_t e,
                                             const float* centroids) {
  if (f.kind == kKvPlain) {
    const uint8_t* p = rec + f.v_codes;
    if (f.plain_bytes == 4) return reinterpret_cast<const float*>(p)[e];
    const uint16_t h = reinterpret_cast<const uint16_t*>(p)[e];
    return f.plain_bf16 ? Bf16ToF32(h) : F16ToF32(h);
  }
  if (f.kind == kKvAffine) {
    const float q = static_cast<float>(Unpack(rec + f.v_codes, e, f.bits));
    const int64_t g = e / f.group;
    return __fmaf_rn(F16ToF32(Load16(rec + f.v_scales + 2 * g)), q, F16ToF32(Load16(rec + f.v_biases + 2 * g)));
  }
  const float r = TurboValueScale(f, rec, e / 32);
  return TurboValueCentroid(f, rec, e, centroids) * r;
}

// ------------------------------------------------------------ encoding

__device__ __forceinline__ uint16_t F16Down(uint16_t h) {
  if (h == 0x0000) return 0x8001;
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}
__device__ __forceinline__ uint16_t F16Up(uint16_t h) {
  if (h == 0x8000) return 0x0001;
  return (h & 0x8000) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}
__device__ __forceinline__ float ClampF(float x, float lo, float hi) { return x < lo ? lo : (hi < x ? hi : x); }
__device__ __forceinline__ uint16_t F16RoundDown(float x) {
  x = ClampF(x, -65504.0f, 65504.0f);
  uint16_t h = F32ToF16(x);
  if (F16ToF32(h) > x) h = F16Down(h);
  return h;
}
__device__ __forceinline__ uint16_t F16RoundUp(float x) {
  x = ClampF(x, -65504.0f, 65504.0f);
  uint16_t h = F32ToF16(x);
  if (F16ToF32(h) < x) h = F16Up(h);
  return h;
}

// Packs n values (n * bits a multiple of 8) LSB-first, as kvfmt::PackBits.
__device__ __forceinline__ void PackInto(const uint8_t* q, int n, int bits, uint8_t* out) {
  if (bits == 8) {
    for (int i = 0; i < n; ++i) out[i] = q[i];
    return;
  }
  uint64_t acc = 0;
  int filled = 0, o = 0;
  for (int i = 0; i < n; ++i) {
    acc |= static_cast<uint64_t>(q[i] & ((1u << bits) - 1)) << filled;
    filled += bits;
    while (filled >= 8) {
      out[o++] = static_cast<uint8_t>(acc);
      acc >>= 8;
      filled -= 8;
    }
  }
}

// AffineQuantizeRow for group g of x (group elements).
__device__ inline void AffineEncodeGroup(const float* xg, int group, int bits, uint8_t* codes, uint8_t* scale,
                                         uint8_t* bias) {
  const int levels = (1 << bits) - 1;
  float lo = xg[0], hi = xg[0];
  for (int i = 1; i < group; ++i) {
    lo = xg[i] < lo ? xg[i] : lo;  // std::min / std::max exactly (signed zeros too)
    hi = hi < xg[i] ? xg[i] : hi;
  }
  const uint16_t b16 = F16RoundDown(lo);
  const float b = F16ToF32(b16);
  const uint16_t s16 = F16RoundUp((hi - b) / static_cast<float>(levels));
  const float s = F16ToF32(s16);
  uint8_t q[128];
  for (int i = 0; i < group; ++i) {
    const float c = s > 0 ? rintf((xg[i] - b) / s) : 0.0f;
    q[i] = static_cast<uint8_t>(ClampF(c, 0.0f, static_cast<float>(levels)));
  }
  PackInto(q, group, bits, codes);
  Store16(scale, s16);
  Store16(bias, b16);
}

__device__ __forceinline__ uint16_t StepToF16(float s) {
  uint16_t h = F32ToF16(fminf(s, 65504.0f));
  if (F16ToF32(h) <= 0) h = 0x0001;
  return h;
}

// TurboEncodeKeysRow for one group of 32.
__device__ inline void TurboEncodeKeyGroup(const float* xg, int key_bits, uint8_t* index, uint8_t* scale,
                                           uint8_t* zero) {
  float lo = xg[0], hi = xg[0];
  for (int i = 1; i < 32; ++i) {
    lo = xg[i] < lo ? xg[i] : lo;
    hi = hi < xg[i] ? xg[i] : hi;
  }
  float s, z;
  if (key_bits == 8) {
    s = F16ToF32(StepToF16(hi > lo ? (hi - lo) / 254.0f : fmaxf(fabsf(lo), 1e-6f) / 127.0f));
    z = hi > lo ? rintf((hi + lo) / (2.0f * s)) : 0.0f;
  } else {
    const float levels = static_cast<float>((1 << key_bits) - 1);
    s = F16ToF32(StepToF16(hi > lo ? (hi - lo) / levels : fmaxf(fabsf(lo), 1e-6f)));
    z = rintf(lo / s);
  }
  const uint16_t z16 = F32ToF16(z);
  z = F16ToF32(z16);
  Store16(scale, F32ToF16(s));
  Store16(zero, z16);
  if (key_bits == 8) {
    for (int i = 0; i < 32; ++i)
      index[i] = static_cast<uint8_t>(static_cast<int8_t>(ClampF(rintf(xg[i] / s - z), -127.0f, 127.0f)));
  } else {
    const float top = static_cast<float>((1 << key_bits) - 1);
    uint8_t q[32];
    for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(ClampF(rintf(xg[i] / s - z), 0.0f, top));
    PackInto(q, 32, key_bits, index);
  }
}

// TurboEncodeValuesRow for one group of 32 of an already rotated row.
__device__ inline void TurboEncodeValueGroup(const float* yg, int value_bits, const float* boundaries,
                                             uint8_t* packed, uint8_t* scale) {
  float ss = 0;
  for (int i = 0; i < 32; ++i) ss = ss + yg[i] * yg[i];
  const uint16_t r16 = F32ToF16(fminf(sqrtf(ss / 32.0f), 65504.0f));
  const float denom = F16ToF32(r16) + 1e-8f;
  const int levels = 1 << value_bits;
  uint8_t q[32];
  for (int i = 0; i < 32; ++i) {
    const float y = yg[i] / denom;
    int lo = 0;
    for (int step = levels / 2; step >= 1; step /= 2) lo += boundaries[lo + step - 1] < y ? step : 0;
    q[i] = static_cast<uint8_t>(lo);
  }
  PackInto(q, 32, value_bits, packed);
  Store16(scale, r16);
}

}  // namespace g4::cuda
