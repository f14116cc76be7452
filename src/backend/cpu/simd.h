// A thin fixed-width float vector (VF, kLanes floats) over AVX-512, AVX2 or
// plain scalars, so each CPU kernel is written once and compiles for every
// variant of isa.h. Only the ops the kernels need are here; tails use the
// masked N-variants, which never touch memory past p + n.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// GCC 12 warns about the deliberately undefined registers inside the
// AVX-512 intrinsics (GCC bug 105593); silence it for the header only.
// (GCC declares every intrinsic whatever the flags; using one needs the
// matching target, which isa.h's G4_CPU_BEGIN provides.)
#if defined(__clang__)
#include <immintrin.h>
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include "backend/cpu/isa.h"
#include "core/float16.h"

G4_CPU_BEGIN

#if G4_ISA_AVX512

constexpr int kLanes = 16;
using VF = __m512;

inline VF VZero() { return _mm512_setzero_ps(); }
inline VF VSet1(float a) { return _mm512_set1_ps(a); }
inline VF VLoad(const float* p) { return _mm512_loadu_ps(p); }
inline VF VLoadN(const float* p, int n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
inline void VStore(float* p, VF v) { _mm512_storeu_ps(p, v); }
inline void VStoreN(float* p, VF v, int n) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
inline VF VAdd(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF VSub(VF a, VF b) { return _mm512_sub_ps(a, b); }
inline VF VMul(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF VDiv(VF a, VF b) { return _mm512_div_ps(a, b); }
inline VF VMax(VF a, VF b) { return _mm512_max_ps(a, b); }
inline VF VMin(VF a, VF b) { return _mm512_min_ps(a, b); }
inline VF VFma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
inline VF VAbs(VF a) { return _mm512_abs_ps(a); }
// Magnitude of `mag` with the sign of `sign`.
inline VF VCopySign(VF mag, VF sign) {
  const __m512i m = _mm512_set1_epi32(0x7fffffff);
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(m, _mm512_castps_si512(mag), _mm512_castps_si512(sign),
                                                       0xca));  // m ? mag : sign
}
// a < b ? x : y, per lane.
inline VF VSelectLt(VF a, VF b, VF x, VF y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}
inline VF VRound(VF a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// a * 2^n for integral-valued n in [-126, 127] (larger |n| saturates sensibly).
inline VF VScale2(VF a, VF n) { return _mm512_scalef_ps(a, n); }
inline float VReduceAdd(VF v) { return _mm512_reduce_add_ps(v); }
inline float VReduceMax(VF v) { return _mm512_reduce_max_ps(v); }
inline VF VLoadBf16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline VF VLoadF16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// kLanes unsigned bytes as floats.
inline VF VLoadU8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

#elif G4_ISA_AVX2

constexpr int kLanes = 8;
using VF = __m256;

inline __m256i TailMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline VF VZero() { return _mm256_setzero_ps(); }
inline VF VSet1(float a) { return _mm256_set1_ps(a); }
inline VF VLoad(const float* p) { return _mm256_loadu_ps(p); }
inline VF VLoadN(const float* p, int n) { return _mm256_maskload_ps(p, TailMask(n)); }
inline void VStore(float* p, VF v) { _mm256_storeu_ps(p, v); }
inline void VStoreN(float* p, VF v, int n) { _mm256_maskstore_ps(p, TailMask(n), v); }
inline VF VAdd(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF VSub(VF a, VF b) { return _mm256_sub_ps(a, b); }
inline VF VMul(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF VDiv(VF a, VF b) { return _mm256_div_ps(a, b); }
inline VF VMax(VF a, VF b) { return _mm256_max_ps(a, b); }
inline VF VMin(VF a, VF b) { return _mm256_min_ps(a, b); }
inline VF VFma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline VF VAbs(VF a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
inline VF VCopySign(VF mag, VF sign) {
  const VF s = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(s, mag), _mm256_and_ps(s, sign));
}
inline VF VSelectLt(VF a, VF b, VF x, VF y) {
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
inline VF VRound(VF a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline VF VScale2(VF a, VF n) {
  n = _mm256_max_ps(_mm256_min_ps(n, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-126.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(a, _mm256_castsi256_ps(e));
}
inline float VReduceAdd(VF v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float VReduceMax(VF v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline VF VLoadBf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline VF VLoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VF VLoadU8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

#else  // portable fallback: GCC turns these fixed loops into whatever SIMD exists

constexpr int kLanes = 8;
struct VF {
  float v[kLanes];
};

#define G4_VF_MAP(expr)                           \
  VF r;                                           \
  for (int i = 0; i < kLanes; ++i) r.v[i] = expr; \
  return r

inline VF VZero() { G4_VF_MAP(0.0f); }
inline VF VSet1(float a) { G4_VF_MAP(a); }
inline VF VLoad(const float* p) { G4_VF_MAP(p[i]); }
inline VF VLoadN(const float* p, int n) { G4_VF_MAP(i < n ? p[i] : 0.0f); }
inline void VStore(float* p, VF v) {
  for (int i = 0; i < kLanes; ++i) p[i] = v.v[i];
}
inline void VStoreN(float* p, VF v, int n) {
  for (int i = 0; i < n; ++i) p[i] = v.v[i];
}
inline VF VAdd(VF a, VF b) { G4_VF_MAP(a.v[i] + b.v[i]); }
inline VF VSub(VF a, VF b) { G4_VF_MAP(a.v[i] - b.v[i]); }
inline VF VMul(VF a, VF b) { G4_VF_MAP(a.v[i] * b.v[i]); }
inline VF VDiv(VF a, VF b) { G4_VF_MAP(a.v[i] / b.v[i]); }
inline VF VMax(VF a, VF b) { G4_VF_MAP(a.v[i] > b.v[i] ? a.v[i] : b.v[i]); }
inline VF VMin(VF a, VF b) { G4_VF_MAP(a.v[i] < b.v[i] ? a.v[i] : b.v[i]); }
inline VF VFma(VF a, VF b, VF c) { G4_VF_MAP(std::fma(a.v[i], b.v[i], c.v[i])); }
inline VF VAbs(VF a) { G4_VF_MAP(std::fabs(a.v[i])); }
inline VF VCopySign(VF mag, VF sign) { G4_VF_MAP(std::copysign(mag.v[i], sign.v[i])); }
inline VF VSelectLt(VF a, VF b, VF x, VF y) { G4_VF_MAP(a.v[i] < b.v[i] ? x.v[i] : y.v[i]); }
inline VF VRound(VF a) { G4_VF_MAP(std::nearbyint(a.v[i])); }
inline VF VScale2(VF a, VF n) { G4_VF_MAP(std::ldexp(a.v[i], static_cast<int>(n.v[i]))); }
inline float VReduceAdd(VF v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v.v[i];
  return s;
}
inline float VReduceMax(VF v) {
  float s = v.v[0];
  for (int i = 1; i < kLanes; ++i) s = v.v[i] > s ? v.v[i] : s;
  return s;
}
inline VF VLoadBf16(const uint16_t* p) { G4_VF_MAP(Bf16ToF32(p[i])); }
inline VF VLoadF16(const uint16_t* p) { G4_VF_MAP(F16ToF32(p[i])); }
inline VF VLoadU8(const uint8_t* p) { G4_VF_MAP(static_cast<float>(p[i])); }

#undef G4_VF_MAP

#endif

// Sum of x[0..n) * y[0..n), vectorized with two accumulator chains.
inline float VDot(const float* x, const float* y, int64_t n) {
  VF a0 = VZero(), a1 = VZero();
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    a0 = VFma(VLoad(x + i), VLoad(y + i), a0);
    a1 = VFma(VLoad(x + i + kLanes), VLoad(y + i + kLanes), a1);
  }
  for (; i + kLanes <= n; i += kLanes) a0 = VFma(VLoad(x + i), VLoad(y + i), a0);
  if (i < n) a1 = VFma(VLoadN(x + i, static_cast<int>(n - i)), VLoadN(y + i, static_cast<int>(n - i)), a1);
  return VReduceAdd(VAdd(a0, a1));
}

// Prefetches [p, p + bytes) into all cache levels, one request per 64-byte
// line. Prefetches never fault, so reading ahead past a buffer is harmless.
inline void PrefetchBytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 3);
}

// Scalar half-precision conversion, using the F16C instruction where present.
inline float HalfToFloat(uint16_t h) {
#if G4_ISA_AVX2
  return _cvtsh_ss(h);
#else
  return F16ToF32(h);
#endif
}

G4_CPU_END
