// Reading one KV head of one record (backend/kv_record.h) as float32 rows,
// for the CPU paged-KV kernels. A KvHeadDecoder is picked once per store
// from its KvRecordFormat; its key and value functions then turn head kh of
// a record into head_dim floats:
//
//   plain f32     a pointer into the record itself (no copy)
//   plain bf16/16 widened into `buf`
//   affine        fma(code, step, bias) per element, into `buf`
//   turbo keys    fma(index, s, s z) per element (x = (i + z) s), into `buf`
//   turbo values  centroid[index] * rms, into `buf`, left in the ROTATED
//                 domain (attention is linear in V; the kernel undoes the
//                 rotation once on its output row)
//
// A key is decoded once per (key, KV head) and then shared by every query
// head of the group, so dequantizing is one FMA per element, cheaper than
// scoring integer codes per query head (two operations per element per head)
// once a KV head serves more than one query head, and never dearer.
//
// Each decode is a pure function of the record bytes: the kernels' results
// never depend on which thread or tile decoded a key.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/affine_codes.h"
#include "backend/cpu/simd.h"
#include "backend/kv_formats.h"
#include "backend/kv_record.h"

G4_CPU_BEGIN

struct KvHeadDecoder;

// Prefetches into L2 (not L1): the L2 tracks many more outstanding misses
// than L1's fill buffers, and a tile's rows are read once.
inline void PrefetchToL2(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 2);
}
// Returns head kh of the record at `rec` as head_dim floats: `buf` (which
// it filled), or a pointer into the record (plain f32).
using KvHeadDecodeFn = const float* (*)(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf);

struct KvHeadDecoder {
  int head_dim = 0;
  int group = 32;    // elements per scale (affine: its group; turbo: 32)
  int key_bits = 0;  // code widths (0 = plain)
  int value_bits = 0;
  bool rotated_values = false;
  KvRecordFormat format;
  const float* centroids = nullptr;  // turbo value codebook [2^value_bits]
  KvHeadDecodeFn key = nullptr;
  KvHeadDecodeFn value = nullptr;
  // Per KV head: bytes of its codes and of its scale (and bias/zero) plane
  // slices in K and V, for prefetching.
  int64_t k_code_bytes = 0, v_code_bytes = 0, scale_bytes = 0;

  // Ask for the bytes head kh of a record's keys (values) will be read
  // from. Blocks are scattered and a head's slices of consecutive records
  // are record_bytes apart, beyond what the hardware prefetcher follows.
  void PrefetchKey(const uint8_t* rec, int kh) const {
    PrefetchToL2(rec + format.k_codes + kh * k_code_bytes, k_code_bytes);
    if (scale_bytes > 0) {
      __builtin_prefetch(rec + format.k_scales + kh * scale_bytes, 0, 2);
      __builtin_prefetch(rec + format.k_biases + kh * scale_bytes, 0, 2);
    }
  }
  void PrefetchValue(const uint8_t* rec, int kh) const {
    PrefetchToL2(rec + format.v_codes + kh * v_code_bytes, v_code_bytes);
    if (scale_bytes > 0) {
      __builtin_prefetch(rec + format.v_scales + kh * scale_bytes, 0, 2);
      if (format.v_biases) __builtin_prefetch(rec + format.v_biases + kh * scale_bytes, 0, 2);
    }
  }
};

// The decoder of a store's format. REQUIRES: format came from
// KvRecordFormat::Make; value_centroids (the store's turbo codebook,
// [2^value_bits]) is set for turbo formats.
KvHeadDecoder MakeKvHeadDecoder(const KvRecordFormat& format, const float* value_centroids);

namespace kvdecode {

inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

// 32 B-bit codes (4 B bytes, LSB-first) as kChunkVecs float vectors.
template <int B>
inline void LoadCodes32(const uint8_t* p, VF* q) {
#if G4_ISA_AVX2
  // Unaligned-safe: the SIMD loaders only use unaligned and masked loads.
  LoadChunkNatural<B>(reinterpret_cast<const uint32_t*>(p), q);
#else
  alignas(64) float tmp[kChunk];
  kvfmt::UnpackGroup32(p, B, tmp);
  for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoad(tmp + v * kLanes);
#endif
}

// 32 signed bytes as float vectors (turbo 8-bit keys).
inline void LoadI8x32(const uint8_t* p, VF* q) {
#if G4_ISA_AVX512
  for (int v = 0; v < kChunkVecs; ++v)
    q[v] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v))));
#elif G4_ISA_AVX2
  for (int v = 0; v < kChunkVecs; ++v)
    q[v] = _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * v))));
#else
  alignas(64) float tmp[kChunk];
  for (int i = 0; i < kChunk; ++i) tmp[i] = static_cast<float>(static_cast<int8_t>(p[i]));
  for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoad(tmp + v * kLanes);
#endif
}

// table[codes] per lane, for codes that are whole numbers in [0, 2^B).
template <int B>
inline VF LookupCentroids(VF codes, const float* table) {
#if G4_ISA_AVX512
  const __m512i idx = _mm512_cvttps_epi32(codes);
  if constexpr (B <= 4) {
    const __m512 t = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (1 << B)) - 1), table);
    return _mm512_permutexvar_ps(idx, t);
  } else if constexpr (B == 5) {
    return _mm512_permutex2var_ps(_mm512_loadu_ps(table), idx, _mm512_loadu_ps(table + 16));
  } else {
    return _mm512_i32gather_ps(idx, table, 4);
  }
#elif G4_ISA_AVX2
  const __m256i idx = _mm256_cvttps_epi32(codes);
  if constexpr (B <= 3) {
    const __m256 t = _mm256_maskload_ps(table, TailMask(1 << B));
    return _mm256_permutevar8x32_ps(t, idx);
  } else {
    return _mm256_i32gather_ps(table, idx, 4);
  }
#else
  VF r;
  for (int i = 0; i < kLanes; ++i) r.v[i] = table[static_cast<int>(codes.v[i])];
  return r;
#endif
}

}  // namespace kvdecode
G4_CPU_END
