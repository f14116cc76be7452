// Unpacking MLX affine codes (layout: io/weight_matrix.h) into float vectors.
//
// Every group size is a multiple of 32, so kernels walk a row in "chunks" of
// 32 columns; a chunk of a B-bit row is exactly B whole u32 words, whatever B
// is. Two orders are offered:
//  - natural: chunk column c in lane c (dequantization, embedding);
//  - dot order (LoadChunkDotOrder): whatever order is cheapest to unpack, to
//    be multiplied with an input row that was permuted the same way once per
//    matmul (PermuteForDot). Only 4-bit differs from natural: the low nibbles
//    (even columns) come first, then the high nibbles (odd columns).
#pragma once

#include <cstdint>

#include "backend/cpu/simd.h"

namespace g4::cpu {

constexpr int kChunk = 32;
constexpr int kChunkVecs = kChunk / kLanes;

// Scalar unpack of one chunk (B words) in natural order. The loop fully
// unrolls, so every word index and shift is a constant.
template <int B>
inline void UnpackChunk(const uint32_t* words, float* out) {
  constexpr uint32_t kMask = (1u << B) - 1;
#pragma GCC unroll 32
  for (int i = 0; i < kChunk; ++i) {
    const int bit = i * B;
    const int wi = bit >> 5;
    const int sh = bit & 31;
    uint32_t v = words[wi] >> sh;
    if (sh + B > 32) v |= words[wi + 1] << (32 - sh);
    out[i] = static_cast<float>(v & kMask);
  }
}

// One chunk as kChunkVecs vectors, natural order.
template <int B>
inline void LoadChunkNatural(const uint32_t* words, VF* q) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(words);
  if constexpr (B == 8) {
    for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoadU8(p + v * kLanes);
  } else if constexpr (B == 4) {
#if defined(__AVX512F__) || defined(__AVX2__)
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, m);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), m);
    const __m128i c0 = _mm_unpacklo_epi8(lo, hi);  // columns 0..15
    const __m128i c1 = _mm_unpackhi_epi8(lo, hi);  // columns 16..31
#if defined(__AVX512F__)
    q[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c0));
    q[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c1));
#else
    q[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c0));
    q[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c0, 8)));
    q[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c1));
    q[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c1, 8)));
#endif
#else
    alignas(64) float tmp[kChunk];
    UnpackChunk<4>(words, tmp);
    for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoad(tmp + v * kLanes);
#endif
  } else {
    alignas(64) float tmp[kChunk];
    UnpackChunk<B>(words, tmp);
    for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoad(tmp + v * kLanes);
  }
}

// One chunk in dot order (see top of file).
template <int B>
inline void LoadChunkDotOrder(const uint32_t* words, VF* q) {
  if constexpr (B == 4) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(words);
#if defined(__AVX512F__) || defined(__AVX2__)
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, m);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), m);
#if defined(__AVX512F__)
    q[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo));
    q[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi));
#else
    q[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    q[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    q[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    q[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
#endif
#else
    alignas(64) float tmp[kChunk];
    for (int i = 0; i < 16; ++i) {
      tmp[i] = static_cast<float>(p[i] & 15);
      tmp[16 + i] = static_cast<float>(p[i] >> 4);
    }
    for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoad(tmp + v * kLanes);
#endif
  } else {
    LoadChunkNatural<B>(words, q);
  }
}

// Whether input rows must be permuted for LoadChunkDotOrder<B>.
constexpr bool DotOrderPermuted(int bits) { return bits == 4; }

// x[0..cols) to the 4-bit dot order: per chunk, even columns then odd ones.
inline void PermuteForDot4(const float* x, int64_t cols, float* out) {
  for (int64_t c = 0; c < cols; c += kChunk) {
    for (int i = 0; i < 16; ++i) {
      out[c + i] = x[c + 2 * i];
      out[c + 16 + i] = x[c + 2 * i + 1];
    }
  }
}

}  // namespace g4::cpu
