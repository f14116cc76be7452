// Unpacking MLX affine codes (layout: io/weight_matrix.h) into float vectors.
//
// Every group size is a multiple of 32, so kernels walk a row in "chunks" of
// 32 columns; a chunk of a B-bit row is exactly B whole u32 words, whatever B
// is. Chunk column c lands in lane c (dequantization: embedding rows, the
// dense GEMM's tiles, KV records). The matmul kernels unpack to bytes
// instead (affine_int8.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/simd.h"

G4_CPU_BEGIN

constexpr int kChunk = 32;
constexpr int kChunkVecs = kChunk / kLanes;

// Word i of a code row. The codes are memory-mapped from a safetensors file,
// whose tensors start at any byte offset, so a word may be misaligned: read
// it through memcpy (one plain load on x86, no undefined behaviour).
inline uint32_t CodeWord(const uint32_t* words, int i) {
  uint32_t v;
  std::memcpy(&v, words + i, sizeof(v));
  return v;
}

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
    uint32_t v = CodeWord(words, wi) >> sh;
    if (sh + B > 32) v |= CodeWord(words, wi + 1) << (32 - sh);
    out[i] = static_cast<float>(v & kMask);
  }
}

#if G4_ISA_AVX2
// Vector unpack for the bit widths that straddle bytes (2, 3, 5, 6). Code i
// of a chunk starts at bit i * B, i.e. byte (i * B) / 8, shift (i * B) % 8,
// and with B <= 6 it lies within that byte and the next. A byte shuffle puts
// those two bytes at the bottom of code i's 32-bit lane, a per-lane shift
// and a mask finish. The chunk is read with a masked load of exactly B
// words, so nothing past the row is touched.
template <int B>
struct StraddleTables {
  // Byte sources and shifts for 8-code quarters (AVX2) / 16-code halves (VBMI).
  alignas(64) uint8_t bytes[kChunk * 4];
  alignas(64) uint32_t shifts[kChunk];
  // AVX2: quarter qi reads a 16-byte window starting at dword base_dword[qi / 2].
  static constexpr int kHighBaseDword = (2 * B) / 4;
  constexpr StraddleTables(bool window) : bytes(), shifts() {
    for (int i = 0; i < kChunk; ++i) {
      const int bit = i * B;
      const int base = window && i >= kChunk / 2 ? 4 * kHighBaseDword : 0;
      bytes[4 * i] = static_cast<uint8_t>(bit / 8 - base);
      bytes[4 * i + 1] = static_cast<uint8_t>(bit / 8 + 1 - base);
      bytes[4 * i + 2] = bytes[4 * i + 3] = 0x80;  // zero (pshufb); ignored by the mask anyway
      shifts[i] = static_cast<uint32_t>(bit % 8);
    }
  }
};

template <int B>
inline void LoadChunkStraddle(const uint32_t* words, VF* q) {
  static_assert(B == 2 || B == 3 || B == 5 || B == 6);
#if G4_ISA_AVX512
  static constexpr StraddleTables<B> kT(false);
  const __m512i chunk = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << B) - 1), words);
  const __m512i mask = _mm512_set1_epi32((1 << B) - 1);
  for (int h = 0; h < 2; ++h) {
    const __m512i idx = _mm512_and_si512(_mm512_load_si512(kT.bytes + 64 * h), _mm512_set1_epi8(0x3f));
    __m512i v = _mm512_permutexvar_epi8(idx, chunk);
    v = _mm512_srlv_epi32(v, _mm512_load_si512(kT.shifts + 16 * h));
    q[h] = _mm512_cvtepi32_ps(_mm512_and_si512(v, mask));
  }
#else
  static constexpr StraddleTables<B> kT(true);
  constexpr int kHi = StraddleTables<B>::kHighBaseDword;
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(B), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i chunk = _mm256_maskload_epi32(reinterpret_cast<const int*>(words), m);
  const __m128i lo = _mm256_castsi256_si128(chunk);
  const __m128i hi = _mm256_castsi256_si128(
      _mm256_permutevar8x32_epi32(chunk, _mm256_setr_epi32(kHi, kHi + 1, kHi + 2, kHi + 3, 0, 0, 0, 0)));
  const __m256i mask = _mm256_set1_epi32((1 << B) - 1);
  __m256i v8[4];
  for (int qi = 0; qi < 4; ++qi) {
    const __m256i src = _mm256_broadcastsi128_si256(qi < 2 ? lo : hi);
    __m256i v =
        _mm256_shuffle_epi8(src, _mm256_load_si256(reinterpret_cast<const __m256i*>(kT.bytes + 32 * qi)));
    v = _mm256_srlv_epi32(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kT.shifts + 8 * qi)));
    v8[qi] = _mm256_and_si256(v, mask);
  }
#if G4_ISA_AVX512
  for (int h = 0; h < 2; ++h)
    q[h] = _mm512_cvtepi32_ps(_mm512_inserti64x4(_mm512_castsi256_si512(v8[2 * h]), v8[2 * h + 1], 1));
#else
  for (int qi = 0; qi < 4; ++qi) q[qi] = _mm256_cvtepi32_ps(v8[qi]);
#endif
#endif
}
#endif

// One chunk as kChunkVecs vectors, natural order.
template <int B>
inline void LoadChunkNatural(const uint32_t* words, VF* q) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(words);
  if constexpr (B == 8) {
    for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoadU8(p + v * kLanes);
  } else if constexpr (B == 4) {
#if G4_ISA_AVX2
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, m);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), m);
    const __m128i c0 = _mm_unpacklo_epi8(lo, hi);  // columns 0..15
    const __m128i c1 = _mm_unpackhi_epi8(lo, hi);  // columns 16..31
#if G4_ISA_AVX512
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
#if G4_ISA_AVX2
    LoadChunkStraddle<B>(words, q);
#else
    alignas(64) float tmp[kChunk];
    UnpackChunk<B>(words, tmp);
    for (int v = 0; v < kChunkVecs; ++v) q[v] = VLoad(tmp + v * kLanes);
#endif
  }
}

G4_CPU_END
