// MatMul over MLX affine weights in integer arithmetic: the canonical order
// of affine weights (kernels.h), shared by the matrix-vector kernels
// (matmul_affine.cc) and the blocked GEMM (gemm_affine.cc).
//
//  1. Each input row is quantized once per call, per weight group g (G
//     columns, the weights' group size):
//        a    = max |x_k| over the group          (exact)
//        d_g  = a / 127, inv = 127 / a            (inv = 0 when a = 0; a NaN
//                                                  or infinite: d_g = NaN)
//        q_k  = round-half-even(x_k * inv)        (int8, in [-127, 127])
//        xs_g = float(sum of the group's q_k) * d_g
//  2. Output (input row m, weight row n), codes c, the group's scale s and
//     bias b (as float):
//        isum_g = sum over the group of c_k * q_k  (int32, exact: any order)
//        y = 0; then for g = 0, 1, ...:
//          y = fma(float(isum_g), s_g * d_g, y);  y = fma(b_g, xs_g, y)
// Every float operation is on one output element, in one fixed sequence,
// and the integer sums are exact whatever order the kernels add them in, so
// an output never depends on the batch, the path (GEMV or GEMM), the tile,
// the thread, nor the kernel variant: avx512, avx2 and baseline give the
// same bits here.
//
// Error: |q_k d_g - x_k| <= d_g / 2 (to a relative 2^-23), so y differs
// from the exact sum_k w_k x_k by at most sum_g (d_g / 2) sum_{k in g} |w_k|
// plus float rounding: 1/254 of the group's largest |x| per weight
// magnitude, like llama.cpp's Q8 activations, and below the error of the
// weights' own 4-bit (or 8-bit) rounding.
//
// The integer products: AVX-512 VNNI vpdpbusd (u8 codes x s8 inputs, four
// per 32-bit lane); AVX2 vpmaddubsw + vpmaddwd (8-bit codes split into
// nibbles there, so the 16-bit pair sums cannot saturate); baseline: plain
// int loops.
#pragma once

#include <cstdint>

#include "backend/cpu/simd.h"
#include "io/weight_matrix.h"

G4_CPU_BEGIN

// How a quantized input row's int8 values are ordered in memory (each
// kernel reads them in the order its unpacked codes come in):
//   kNatural  column order
//   kSplit    per unit of `unit` columns: the even columns, then the odd
//             ones (4-bit GEMV: low nibbles, then high nibbles)
//   kOctet    per 8 columns: the 4 even ones, then the 4 odd ones (4-bit
//             GEMM panels)
enum class ActLayout { kNatural, kSplit, kOctet };

// Quantized input rows (step 1 above). Row m: q + m * ldq (ldq >= padded
// columns, zeros past the last column), d + m * ldg and xs + m * ldg (one
// per group).
struct ActRows {
  const int8_t* q = nullptr;
  int64_t ldq = 0;
  const float* d = nullptr;
  const float* xs = nullptr;
  int64_t ldg = 0;
};

// Quantizes rows [0, m) of x (row stride ldx, k columns) for group size
// `group` into q (row stride ldq >= kpad >= k; columns [k, kpad) zero), d
// and xs (row stride ldg >= k / group). `unit`: kSplit's unit (a multiple
// of 16 dividing kpad). Runs on the calling thread.
void QuantizeActRows(const float* x, int64_t ldx, int64_t m, int64_t k, int group, ActLayout layout,
                     int64_t unit, int64_t kpad, int8_t* q, int64_t ldq, float* d, float* xs, int64_t ldg);

// Scales (or biases) of weight rows [row0, row0 + nr) and groups [g0, g0 +
// ng) as float, transposed: out[j * kLanes + r] = value of (row0 + r, g0 +
// j); zero for r >= nr or j >= ng. nr, ng <= kLanes.
void TransposeGroupValues(DType t, const void* base, int64_t gpr, int64_t row0, int nr, int64_t g0, int ng,
                          float* out);

// matmul_affine.cc: y = x W^T for m_rows <= kGemvMaxRows input rows already
// quantized in GemvLayout(w.bits) (unit GemvUnitCols, padded to
// PaddedCols), output row m at y + m * ldy.
void GemvAffineInt8(const ActRows& x, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy);
ActLayout GemvLayout(int bits);
int64_t GemvUnitCols(int bits);
int64_t PaddedCols(int64_t k, int bits);

// Step 2's update of kLanes outputs (one per weight row) by one group.
inline VF GroupUpdate(VF y, VF isum_f, VF s, VF b, float d, float xs) {
  y = VFma(isum_f, VMul(s, VSet1(d)), y);
  return VFma(b, VSet1(xs), y);
}

#if G4_ISA_AVX2
// The SIMD kernels read a row's packed codes in units of kUnitBytes bytes
// (kUnitBytes = the vector width), unpack them to u8 codes (Unit<B>) and
// take four-code dot products into the 32-bit lanes of a VI (DotUnit): lane
// i then holds codes [i * ColsPerLane, (i + 1) * ColsPerLane) of the unit in
// the GEMV activation layout's order, so a group's partial sums sit in
// consecutive lanes.
#if G4_ISA_AVX512
using VI = __m512i;
inline VI VIZero() { return _mm512_setzero_si512(); }
inline VI VIAdd(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VF VICvt(VI a) { return _mm512_cvtepi32_ps(a); }
inline void VIStore(int32_t* p, VI v) { _mm512_storeu_si512(p, v); }
inline VI VILoad(const void* p) { return _mm512_loadu_si512(p); }
#else
using VI = __m256i;
inline VI VIZero() { return _mm256_setzero_si256(); }
inline VI VIAdd(VI a, VI b) { return _mm256_add_epi32(a, b); }
inline VF VICvt(VI a) { return _mm256_cvtepi32_ps(a); }
inline void VIStore(int32_t* p, VI v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline VI VILoad(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
#endif
constexpr int kUnitBytes = kLanes * 4;

// The first n bytes at p (n may exceed the vector; none past p + n read).
inline VI LoadBytes(const uint8_t* p, int64_t n) {
#if G4_ISA_AVX512
  if (n >= 64) return _mm512_loadu_si512(p);
  return _mm512_maskz_loadu_epi8((__mmask64{1} << n) - 1, p);
#else
  if (n >= 32) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // Code rows are whole 32-bit words (MLX layout), so n is a multiple of 4.
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n / 4)),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), m);
#endif
}

inline VI SplatByte(int v) {
#if G4_ISA_AVX512
  return _mm512_set1_epi8(static_cast<char>(v));
#else
  return _mm256_set1_epi8(static_cast<char>(v));
#endif
}
inline VI And(VI a, VI b) {
#if G4_ISA_AVX512
  return _mm512_and_si512(a, b);
#else
  return _mm256_and_si256(a, b);
#endif
}
inline VI ShiftRight16(VI a, int n) {
#if G4_ISA_AVX512
  return _mm512_srli_epi16(a, n);
#else
  return _mm256_srli_epi16(a, n);
#endif
}

// acc += per 32-bit lane, the sum of its four u8 codes times the four s8
// inputs at the same bytes. Codes at most 63 on AVX2 (no saturation of
// vpmaddubsw's 16-bit pair sums: 2 * 63 * 127 < 2^15).
inline VI Dot4(VI acc, VI codes, VI x) {
#if G4_ISA_AVX512
  return _mm512_dpbusd_epi32(acc, codes, x);
#else
  const __m256i pairs = _mm256_maddubs_epi16(codes, x);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

// B-bit codes [i * 4 * kLanes, ...) of a unit as u8 vectors.
template <int B>
struct Unit;

// 4-bit: one unit is kUnitBytes bytes = 2 * kUnitBytes codes; vector 0
// holds the low nibbles (even columns), vector 1 the high ones (odd). The
// GEMV layout is kSplit with this unit.
template <>
struct Unit<4> {
  static constexpr int kVecs = 2;
  static constexpr int64_t kCols = 2 * kUnitBytes;
  static constexpr int kColsPerLane = 8;
  static constexpr int64_t kBytes = kUnitBytes;
  static void Load(const uint8_t* p, int64_t avail, VI* c) {
    const VI v = LoadBytes(p, avail);
    const VI m = SplatByte(0x0f);
    c[0] = And(v, m);
    c[1] = And(ShiftRight16(v, 4), m);
  }
  static VI Dot(const VI* c, const int8_t* x, VI acc) {
    acc = Dot4(acc, c[0], VILoad(x));
    return Dot4(acc, c[1], VILoad(x + kUnitBytes));
  }
};

// 8-bit: the codes as they are (AVX2: split into nibbles, the high one
// weighted 16, to stay within vpmaddubsw's range). Natural layout.
template <>
struct Unit<8> {
  static constexpr int kVecs = G4_ISA_AVX512 ? 1 : 2;
  static constexpr int64_t kCols = kUnitBytes;
  static constexpr int kColsPerLane = 4;
  static constexpr int64_t kBytes = kUnitBytes;
  static void Load(const uint8_t* p, int64_t avail, VI* c) {
    const VI v = LoadBytes(p, avail);
#if G4_ISA_AVX512
    c[0] = v;
#else
    const VI m = SplatByte(0x0f);
    c[0] = And(v, m);
    c[1] = And(ShiftRight16(v, 4), m);
#endif
  }
  static VI Dot(const VI* c, const int8_t* x, VI acc) {
    const VI xv = VILoad(x);
#if G4_ISA_AVX512
    return Dot4(acc, c[0], xv);
#else
    const VI hi = Dot4(_mm256_setzero_si256(), c[1], xv);
    return Dot4(_mm256_add_epi32(acc, _mm256_slli_epi32(hi, 4)), c[0], xv);
#endif
  }
};

// 2-, 3-, 5- and 6-bit codes straddle bytes; a unit is 4 * kLanes codes (B *
// kLanes / 2 bytes), unpacked to bytes in column order. Natural layout.
// AVX-512 (VBMI): vpermb gathers the B bytes holding codes 8j..8j+7 into
// 64-bit lane j, vpmultishiftqb picks each code's bits there. AVX2: per
// code, a byte shuffle brings its two bytes into a 32-bit lane, a variable
// shift and a mask finish, then the lanes are packed to bytes.
template <int B>
struct StraddleUnitTables {
#if G4_ISA_AVX512
  alignas(64) uint8_t index[64];
  alignas(64) uint8_t shift[64];
  constexpr StraddleUnitTables() : index(), shift() {
    for (int j = 0; j < 8; ++j) {
      for (int t = 0; t < 8; ++t) {
        index[8 * j + t] = static_cast<uint8_t>(B * j + t);
        shift[8 * j + t] = static_cast<uint8_t>(B * t);
      }
    }
  }
#else
  // Per quarter of 8 codes: each code's two source bytes within the
  // quarter's 16-byte window (both 128-bit halves see the same window).
  alignas(32) uint8_t bytes[4][32];
  alignas(32) uint32_t shift[4][8];
  int window[4];  // first byte of each quarter's 16-byte window
  constexpr StraddleUnitTables() : bytes(), shift(), window() {
    for (int qi = 0; qi < 4; ++qi) {
      window[qi] = (qi * 8 * B / 8) / 4 * 4;
      for (int i = 0; i < 8; ++i) {
        const int bit = (qi * 8 + i) * B;
        bytes[qi][4 * i] = static_cast<uint8_t>(bit / 8 - window[qi]);
        bytes[qi][4 * i + 1] = static_cast<uint8_t>(bit / 8 + 1 - window[qi]);
        bytes[qi][4 * i + 2] = bytes[qi][4 * i + 3] = 0x80;
        shift[qi][i] = static_cast<uint32_t>(bit % 8);
      }
    }
  }
#endif
};

template <int B>
struct Unit {
  static_assert(B == 2 || B == 3 || B == 5 || B == 6);
  static constexpr int kVecs = 1;
  static constexpr int64_t kCols = 4 * kLanes;
  static constexpr int kColsPerLane = 4;
  static constexpr int64_t kBytes = B * kLanes / 2;
  static void Load(const uint8_t* p, int64_t avail, VI* c) {
    static constexpr StraddleUnitTables<B> kT;
    const int64_t n = avail < kBytes ? avail : kBytes;
#if G4_ISA_AVX512
    const VI v = LoadBytes(p, n);
    const VI gathered = _mm512_permutexvar_epi8(_mm512_load_si512(kT.index), v);
    c[0] = _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_load_si512(kT.shift), gathered),
                            _mm512_set1_epi8((1 << B) - 1));
#else
    // Up to 24 bytes (6-bit): two 16-byte windows cover every quarter.
    alignas(32) uint8_t buf[48] = {};
    for (int64_t i = 0; i < n; ++i) buf[i] = p[i];
    const __m256i mask = _mm256_set1_epi32((1 << B) - 1);
    __m256i q[4];
    for (int qi = 0; qi < 4; ++qi) {
      const __m256i src =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + kT.window[qi])));
      __m256i v = _mm256_shuffle_epi8(src, _mm256_load_si256(reinterpret_cast<const __m256i*>(kT.bytes[qi])));
      v = _mm256_srlv_epi32(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kT.shift[qi])));
      q[qi] = _mm256_and_si256(v, mask);
    }
    // Codes 0-7 | 8-15 | 16-23 | 24-31 in 32-bit lanes -> bytes, then the
    // 4-byte groups back into column order.
    const __m256i p01 = _mm256_packus_epi32(q[0], q[1]);  // 0-3 8-11 | 4-7 12-15
    const __m256i p23 = _mm256_packus_epi32(q[2], q[3]);  // 16-19 24-27 | 20-23 28-31
    const __m256i b = _mm256_packus_epi16(p01, p23);      // 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31
    c[0] = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
#endif
  }
  static VI Dot(const VI* c, const int8_t* x, VI acc) { return Dot4(acc, c[0], VILoad(x)); }
};

// v[r] (r < kLanes): lane partial sums of weight row r, lane i belonging to
// group i / L. Writes kLanes / L vectors out[j], lane r = the sum of v[r]'s
// lanes [j L, (j + 1) L): group j's sums, one weight row per lane.
template <int L>
inline void ReduceRows(const VI* v, VI* out) {
#if G4_ISA_AVX512
  static_assert(L == 4 || L == 8 || L == 16);
  VI a[8], b[4];
  for (int p = 0; p < 8; ++p)
    a[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]),
                            _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
  // b[q], 128-bit quarter k: rows 4q..4q+3, each summed over quarter k's lanes.
  for (int q = 0; q < 4; ++q)
    b[q] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * q], a[2 * q + 1]),
                            _mm512_unpackhi_epi64(a[2 * q], a[2 * q + 1]));
  if constexpr (L == 4) {
#define G4_QUARTER(k)                                                         \
  {                                                                           \
    const VI t01 = _mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(k, k, k, k)); \
    const VI t23 = _mm512_shuffle_i32x4(b[2], b[3], _MM_SHUFFLE(k, k, k, k)); \
    out[k] = _mm512_shuffle_i32x4(t01, t23, _MM_SHUFFLE(2, 0, 2, 0));         \
  }
    G4_QUARTER(0)
    G4_QUARTER(1)
    G4_QUARTER(2)
    G4_QUARTER(3)
#undef G4_QUARTER
  } else {
    const VI s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const VI s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2], b[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_i32x4(b[2], b[3], _MM_SHUFFLE(3, 1, 3, 1)));
    const VI g0 = _mm512_shuffle_i32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0));
    const VI g1 = _mm512_shuffle_i32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1));
    if constexpr (L == 8) {
      out[0] = g0;
      out[1] = g1;
    } else {
      out[0] = _mm512_add_epi32(g0, g1);
    }
  }
#else
  static_assert(L == 4 || L == 8);
  VI a[4], b[2];
  for (int p = 0; p < 4; ++p)
    a[p] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * p], v[2 * p + 1]),
                            _mm256_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
  for (int q = 0; q < 2; ++q)
    b[q] = _mm256_add_epi32(_mm256_unpacklo_epi64(a[2 * q], a[2 * q + 1]),
                            _mm256_unpackhi_epi64(a[2 * q], a[2 * q + 1]));
  const VI lo = _mm256_permute2x128_si256(b[0], b[1], 0x20), hi = _mm256_permute2x128_si256(b[0], b[1], 0x31);
  if constexpr (L == 4) {
    out[0] = lo;
    out[1] = hi;
  } else {
    out[0] = _mm256_add_epi32(lo, hi);
  }
#endif
}
// 4-byte words of kLanes rows (one VI each) -> per word index o, a VI with
// row r's word o in lane r.
inline void TransposeWords(VI* v) {
#if G4_ISA_AVX512
  VI t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  // r[4i + c], 128-bit quarter k: rows 4i..4i+3, word 4k + c.
  VI r[16];
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const VI a_lo = _mm512_shuffle_i32x4(r[c], r[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const VI a_hi = _mm512_shuffle_i32x4(r[c], r[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
    const VI b_lo = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const VI b_hi = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
    v[0 + c] = _mm512_shuffle_i32x4(a_lo, b_lo, _MM_SHUFFLE(2, 0, 2, 0));
    v[4 + c] = _mm512_shuffle_i32x4(a_lo, b_lo, _MM_SHUFFLE(3, 1, 3, 1));
    v[8 + c] = _mm512_shuffle_i32x4(a_hi, b_hi, _MM_SHUFFLE(2, 0, 2, 0));
    v[12 + c] = _mm512_shuffle_i32x4(a_hi, b_hi, _MM_SHUFFLE(3, 1, 3, 1));
  }
#else
  VI t[8], r[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    r[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    r[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    v[c] = _mm256_permute2x128_si256(r[c], r[4 + c], 0x20);
    v[4 + c] = _mm256_permute2x128_si256(r[c], r[4 + c], 0x31);
  }
#endif
}

#endif  // G4_ISA_AVX2

G4_CPU_END
