// Matrix-vector products over MLX affine weights (decode), in the integer
// scheme of affine_int8.h, plus that scheme's input quantization.
//
// SIMD variants: weight rows are taken kLanes at a time (a block). Each row
// is read once, unit by unit, straight from its packed codes: unpacked to
// u8 in registers and dot-multiplied four codes per 32-bit lane with the
// int8 input. After a group's worth of units, one reduction network over the
// block's kLanes vectors leaves each group's exact sums with one weight row
// per lane, so step 2's float update runs on whole vectors, one output per
// lane, and the scales and biases it needs are transposed the same way once
// per kLanes groups. Baseline: the same arithmetic in plain loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/affine_codes.h"
#include "backend/cpu/affine_int8.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/scratch.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

#if !G4_ISA_AVX2
inline uint32_t AbsBits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u & 0x7fffffffu;
}
#endif

// max over i < n of |x[i]| as bits (n a multiple of 32).
uint32_t MaxAbsBits(const float* x, int n) {
#if G4_ISA_AVX512
  __m512i m = _mm512_setzero_si512();
  const __m512i abs = _mm512_set1_epi32(0x7fffffff);
  for (int i = 0; i < n; i += 16) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
  return static_cast<uint32_t>(_mm512_reduce_max_epu32(m));
#elif G4_ISA_AVX2
  __m256i m = _mm256_setzero_si256();
  const __m256i abs = _mm256_set1_epi32(0x7fffffff);
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_epu32(m,
                         _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  uint32_t r = 0;
  for (uint32_t v : lanes) r = std::max(r, v);
  return r;
#else
  uint32_t r = 0;
  for (int i = 0; i < n; ++i) r = std::max(r, AbsBits(x[i]));
  return r;
#endif
}

// q[i] = round-half-even(x[i] * inv) clamped to [-127, 127] (a NaN product:
// -127), for i < n (a multiple of 32); returns the sum of the q[i].
int32_t QuantizeGroup(const float* x, int n, float inv, int8_t* q) {
#if G4_ISA_AVX512
  const __m512 vi = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  __m512i sum = _mm512_setzero_si512();
  for (int i = 0; i < n; i += 16) {
    // cvtps rounds half to even (the default MXCSR mode); NaN gives INT_MIN.
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vi));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    sum = _mm512_add_epi32(sum, v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
  }
  return _mm512_reduce_add_epi32(sum);
#elif G4_ISA_AVX2
  const __m256 vi = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i sum = _mm256_setzero_si256();
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < n; i += 8) {
    __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
    v = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
    sum = _mm256_add_epi32(sum, v);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
    for (int j = 0; j < 8; ++j) q[i + j] = static_cast<int8_t>(lanes[j]);
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  int32_t total = 0;
  for (int32_t v : lanes) total += v;
  return total;
#else
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) {
    const float v = std::nearbyint(x[i] * inv);
    const int32_t qi = std::isnan(v) ? -127 : static_cast<int32_t>(std::min(127.0f, std::max(-127.0f, v)));
    q[i] = static_cast<int8_t>(qi);
    sum += qi;
  }
  return sum;
#endif
}

}  // namespace

void QuantizeActRows(const float* x, int64_t ldx, int64_t m, int64_t k, int group, ActLayout layout,
                     int64_t unit, int64_t kpad, int8_t* q, int64_t ldq, float* d, float* xs, int64_t ldg) {
  const int64_t groups = k / group;
  alignas(64) int8_t natural[128];
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * ldx;
    int8_t* qr = q + r * ldq;
    std::memset(qr + k, 0, kpad - k);
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = xr + g * group;
      const uint32_t amax_bits = MaxAbsBits(xg, group);  // ordered like the values, NaN above infinity
      float amax;
      std::memcpy(&amax, &amax_bits, 4);
      const bool finite = amax_bits < 0x7f800000u;
      const float dg = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
      const float inv = finite && amax_bits != 0 ? 127.0f / amax : 0.0f;
      const int32_t sum = QuantizeGroup(xg, group, inv, natural);
      d[r * ldg + g] = dg;
      xs[r * ldg + g] = static_cast<float>(sum) * dg;
      if (layout == ActLayout::kNatural) {
        std::memcpy(qr + g * group, natural, group);
      } else if (layout == ActLayout::kOctet) {
        // Per 8 bytes: 0 2 4 6 1 3 5 7 (SSSE3, in every variant).
        const __m128i perm = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
        for (int i = 0; i < group; i += 16) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(natural + i));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(qr + g * group + i), _mm_shuffle_epi8(v, perm));
        }
      } else {
        // Even columns to the unit's first half, odd ones to its second.
        for (int i = 0; i < group; i += 2) {
          const int64_t c = g * group + i, base = c / unit * unit, half = (c - base) / 2;
          qr[base + half] = natural[i];
          qr[base + unit / 2 + half] = natural[i + 1];
        }
      }
    }
  }
}

void TransposeGroupValues(DType t, const void* base, int64_t gpr, int64_t row0, int nr, int64_t g0, int ng,
                          float* out) {
#if G4_ISA_AVX2
  // Row r's values as one vector (zero past ng), then a 32-bit transpose.
  VI v[kLanes];
  for (int r = 0; r < kLanes; ++r) {
    if (r >= nr) {
      v[r] = VIZero();
      continue;
    }
    const int64_t first = (row0 + r) * gpr + g0;
    VF f;
    if (t == DType::kF32) {
      f = ng == kLanes ? VLoad(static_cast<const float*>(base) + first)
                       : VLoadN(static_cast<const float*>(base) + first, ng);
    } else {
      const uint16_t* h = static_cast<const uint16_t*>(base) + first;
#if G4_ISA_AVX512
      // A masked load: a copy through the stack would stall on store
      // forwarding (E2B's 24 groups per row make half the calls partial).
      const __m256i raw = ng == kLanes ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h))
                                       : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << ng) - 1), h);
      f = t == DType::kBF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16))
                            : _mm512_cvtph_ps(raw);
#else
      uint16_t tmp[kLanes] = {};
      if (ng < kLanes) {
        std::memcpy(tmp, h, ng * sizeof(uint16_t));
        h = tmp;
      }
      f = t == DType::kBF16 ? VLoadBf16(h) : VLoadF16(h);
#endif
    }
#if G4_ISA_AVX512
    v[r] = _mm512_castps_si512(f);
#else
    v[r] = _mm256_castps_si256(f);
#endif
  }
  TransposeWords(v);
  for (int j = 0; j < kLanes; ++j) VIStore(reinterpret_cast<int32_t*>(out + j * kLanes), v[j]);
#else
  alignas(64) float rowv[kLanes];
  for (int r = 0; r < kLanes; ++r) {
    if (r < nr) ConvertToFloat(t, base, (row0 + r) * gpr + g0, ng, rowv);
    for (int j = 0; j < kLanes; ++j) out[j * kLanes + r] = (r < nr && j < ng) ? rowv[j] : 0.0f;
  }
#endif
}

namespace {

#if G4_ISA_AVX2

// Memory order. The codes are read the way they lie: a block's kLanes rows
// are contiguous, and so are the blocks a member takes, so the kernel goes
// through one row after the other (a chunk of each row at a time when rows
// are long) and the hardware prefetcher sees one sequential stream. Reading
// the block's rows side by side instead (one unit of each in turn) makes
// kLanes short streams (768 bytes each for E2B's 1536 columns) that no
// prefetcher gets ahead of: the kernel ran at a third of the read bandwidth.
// The rows' per-unit dot products wait in a tile in L1 until the block's
// chunk is done; then the reduction network and the float steps run as
// before, so nothing about the arithmetic or its order changes.
constexpr int64_t kTileBytes = 32 * 1024;
// The codes are also requested about kAheadBytes ahead of their use (whole
// rows ahead: the same chunk of a later row), into L2 (prefetcht1): the
// hardware prefetcher alone, or prefetches into L1 (whose few miss buffers
// then stall the loads), left the kernel at a third to a half of the read
// bandwidth on one core (AMD Zen 4: 7.5 -> 13.4 GB/s, ops_bench q4g64_cold).
constexpr int64_t kAheadBytes = 8192;

// BF16 scales and biases of rows [row0, row0 + nr) and groups [g0, g0 + ng)
// (nr, ng <= kLanes), transposed in one pass: out[j * kLanes + r] holds row
// r's group j scale in its low 16 bits and bias in its high 16 bits (zero
// past nr or ng). One 32-bit transpose instead of two: the transposes were a
// tenth of E2B's decode time.
void TransposeScaleBiasBf16(const WeightMatrix& w, int64_t row0, int nr, int64_t g0, int ng, uint32_t* out) {
  const int64_t gpr = w.groups_per_row();
  const uint16_t* sc = static_cast<const uint16_t*>(w.scales);
  const uint16_t* bi = static_cast<const uint16_t*>(w.biases);
  VI v[kLanes];
  for (int r = 0; r < kLanes; ++r) {
    if (r >= nr) {
      v[r] = VIZero();
      continue;
    }
    const int64_t first = (row0 + r) * gpr + g0;
#if G4_ISA_AVX512
    const __mmask16 mask = static_cast<__mmask16>((1u << ng) - 1);
    const __m512i s16 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, sc + first));
    const __m512i b16 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, bi + first));
    v[r] = _mm512_or_si512(s16, _mm512_slli_epi32(b16, 16));
#else
    alignas(16) uint16_t ts[kLanes] = {}, tb[kLanes] = {};
    const uint16_t* ps = sc + first;
    const uint16_t* pb = bi + first;
    if (ng < kLanes) {
      std::memcpy(ts, ps, ng * sizeof(uint16_t));
      std::memcpy(tb, pb, ng * sizeof(uint16_t));
      ps = ts;
      pb = tb;
    }
    const __m256i s16 = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ps)));
    const __m256i b16 = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb)));
    v[r] = _mm256_or_si256(s16, _mm256_slli_epi32(b16, 16));
#endif
  }
  TransposeWords(v);
  for (int j = 0; j < kLanes; ++j) VIStore(reinterpret_cast<int32_t*>(out + j * kLanes), v[j]);
}

// The scale (low half) and bias (high half) of a TransposeScaleBiasBf16
// vector as floats: exactly what VLoadBf16 gives for each.
inline VF PairScale(VI p) {
#if G4_ISA_AVX512
  return _mm512_castsi512_ps(_mm512_slli_epi32(p, 16));
#else
  return _mm256_castsi256_ps(_mm256_slli_epi32(p, 16));
#endif
}
inline VF PairBias(VI p) {
#if G4_ISA_AVX512
  return _mm512_castsi512_ps(_mm512_and_si512(p, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
#else
  return _mm256_castsi256_ps(_mm256_and_si256(p, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
#endif
}

// Outputs of weight rows [n0, n0 + nr) (nr <= kLanes) for every input row.
// kM: 1 when m_rows is known to be 1 (decode: the compiler keeps everything
// in registers), 0 for any m_rows.
template <int B, int G, int kM>
void GemvBlock(const ActRows& x, int64_t m_rows_arg, const WeightMatrix& w, int64_t n0, int nr, float* y,
               int64_t ldy) {
  const int64_t m_rows = kM == 0 ? m_rows_arg : kM;
  using U = Unit<B>;
  constexpr int kCpl = U::kColsPerLane;
  constexpr int kL = G / kCpl < kLanes ? G / kCpl : kLanes;  // lanes per group
  constexpr int kUnitsPerStep = G > kLanes * kCpl ? G / (kLanes * kCpl) : 1;
  constexpr int kGroupsPerStep = kLanes / kL;  // 1 unless a unit holds several groups
  constexpr int64_t kStepCols = kUnitsPerStep * U::kCols;
  static_assert(kStepCols == static_cast<int64_t>(kGroupsPerStep) * G);
  const int64_t k = w.cols, gpr = w.groups_per_row();
  const int64_t row_bytes = w.words_per_row() * 4;
  const int64_t steps = (k + kStepCols - 1) / kStepCols;
  // The tile: per step of the chunk and input row, kLanes vectors (one per
  // weight row) of lane partial sums.
  alignas(64) VI tile[kTileBytes / sizeof(VI)];
  const int64_t chunk_steps = std::max<int64_t>(1, kTileBytes / (sizeof(VI) * kLanes * m_rows));
  VF acc[kGemvMaxRows];
  for (int64_t m = 0; m < m_rows; ++m) acc[m] = VZero();
  alignas(64) float st[kLanes * kLanes], bt[kLanes * kLanes];
  alignas(64) uint32_t sbt[kLanes * kLanes];
  const bool paired = w.scale_dtype == DType::kBF16;
  int64_t g_base = -1;
  if (n0 + kLanes < w.rows) {  // the next block's scales and biases
    const int64_t sb = DTypeSize(w.scale_dtype), bytes = std::min<int64_t>(kLanes, w.rows - n0 - kLanes) * gpr * sb;
    for (int64_t o = 0; o < bytes; o += 64) {
      _mm_prefetch(static_cast<const char*>(w.scales) + (n0 + kLanes) * gpr * sb + o, _MM_HINT_T0);
      _mm_prefetch(static_cast<const char*>(w.biases) + (n0 + kLanes) * gpr * sb + o, _MM_HINT_T0);
    }
  }
  const uint8_t* codes = reinterpret_cast<const uint8_t*>(w.codes);
  for (int64_t s0 = 0; s0 < steps; s0 += chunk_steps) {
    const int64_t s1 = std::min(steps, s0 + chunk_steps);
    for (int r = 0; r < kLanes; ++r) {
      VI* tr = tile + r;
      if (r >= nr) {
        for (int64_t i = 0; i < (s1 - s0) * m_rows; ++i) tr[i * kLanes] = VIZero();
        continue;
      }
      const uint8_t* row = codes + (n0 + r) * row_bytes;
      const int64_t ahead_rows = (kAheadBytes + row_bytes - 1) / row_bytes;
      const uint8_t* ahead = n0 + r + ahead_rows < w.rows ? row + ahead_rows * row_bytes : nullptr;
      for (int64_t step = s0; step < s1; ++step) {
        VI c[kUnitsPerStep][U::kVecs];
#pragma GCC unroll 8
        for (int uu = 0; uu < kUnitsPerStep; ++uu) {
          const int64_t off = (step * kUnitsPerStep + uu) * U::kBytes;
          if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T1);
          U::Load(row + off, std::max<int64_t>(0, row_bytes - off), c[uu]);
        }
        for (int64_t m = 0; m < m_rows; ++m) {
          VI v = VIZero();
#pragma GCC unroll 8
          for (int uu = 0; uu < kUnitsPerStep; ++uu)
            v = U::Dot(c[uu], x.q + m * x.ldq + (step * kUnitsPerStep + uu) * U::kCols, v);
          tr[((step - s0) * m_rows + m) * kLanes] = v;
        }
      }
    }
    for (int64_t step = s0; step < s1; ++step) {
      const int64_t g0 = step * kGroupsPerStep;
      const int ng = static_cast<int>(std::min<int64_t>(kGroupsPerStep, gpr - g0));
      if (g_base < 0 || g0 >= g_base + kLanes) {
        g_base = g0 / kLanes * kLanes;
        const int n_g = static_cast<int>(std::min<int64_t>(kLanes, gpr - g_base));
        if (paired) {
          TransposeScaleBiasBf16(w, n0, nr, g_base, n_g, sbt);
        } else {
          TransposeGroupValues(w.scale_dtype, w.scales, gpr, n0, nr, g_base, n_g, st);
          TransposeGroupValues(w.scale_dtype, w.biases, gpr, n0, nr, g_base, n_g, bt);
        }
      }
      for (int64_t m = 0; m < m_rows; ++m) {
        VI isum[kGroupsPerStep];
        ReduceRows<kL>(tile + ((step - s0) * m_rows + m) * kLanes, isum);
        const float* dm = x.d + m * x.ldg;
        const float* xsm = x.xs + m * x.ldg;
        for (int j = 0; j < ng; ++j) {
          const int64_t g = g0 + j;
          const int64_t t = (g - g_base) * kLanes;
          VF sv, bv;
          if (paired) {
            const VI p = VILoad(sbt + t);
            sv = PairScale(p);
            bv = PairBias(p);
          } else {
            sv = VLoad(st + t);
            bv = VLoad(bt + t);
          }
          acc[m] = GroupUpdate(acc[m], VICvt(isum[j]), sv, bv, dm[g], xsm[g]);
        }
      }
    }
  }
  for (int64_t m = 0; m < m_rows; ++m) {
    if (nr == kLanes) {
      VStore(y + m * ldy + n0, acc[m]);
    } else {
      VStoreN(y + m * ldy + n0, acc[m], nr);
    }
  }
}

#else  // baseline

// B-bit codes [32 c, 32 c + 32) of a row, as bytes.
template <int B>
void UnpackCodes32(const uint32_t* words, uint8_t* out) {
  constexpr uint32_t kMask = (1u << B) - 1;
  for (int i = 0; i < kChunk; ++i) {
    const int bit = i * B, wi = bit >> 5, sh = bit & 31;
    uint32_t v = CodeWord(words, wi) >> sh;
    if (sh + B > 32) v |= CodeWord(words, wi + 1) << (32 - sh);
    out[i] = static_cast<uint8_t>(v & kMask);
  }
}

template <int B, int G, int kM>
void GemvBlock(const ActRows& x, int64_t m_rows, const WeightMatrix& w, int64_t n0, int nr, float* y,
               int64_t ldy) {
  const int64_t gpr = w.groups_per_row();
  uint8_t codes[G];
  for (int r = 0; r < nr; ++r) {
    const int64_t n = n0 + r;
    const uint32_t* words = w.codes + n * w.words_per_row();
    float acc[kGemvMaxRows] = {};
    for (int64_t g = 0; g < gpr; ++g) {
      for (int c = 0; c < G / kChunk; ++c)
        UnpackCodes32<B>(words + (g * G / kChunk + c) * B, codes + c * kChunk);
      float s, b;
      ConvertToFloat(w.scale_dtype, w.scales, n * gpr + g, 1, &s);
      ConvertToFloat(w.scale_dtype, w.biases, n * gpr + g, 1, &b);
      for (int64_t m = 0; m < m_rows; ++m) {
        const int8_t* xq = x.q + m * x.ldq + g * G;
        int32_t isum = 0;
        for (int i = 0; i < G; ++i) isum += static_cast<int32_t>(codes[i]) * xq[i];
        const float d = x.d[m * x.ldg + g], xsum = x.xs[m * x.ldg + g];
        acc[m] = std::fma(static_cast<float>(isum), s * d, acc[m]);
        acc[m] = std::fma(b, xsum, acc[m]);
      }
    }
    for (int64_t m = 0; m < m_rows; ++m) y[m * ldy + n] = acc[m];
  }
}

#endif

template <int B, int G>
void GemvAll(const ActRows& x, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  const int64_t n_rows = w.rows;
  const int64_t blocks = (n_rows + kLanes - 1) / kLanes;
  const int64_t block_bytes = kLanes * w.words_per_row() * 4;
  // A member takes at least 32 KiB of codes: less is not worth a hand-off.
  ParallelFor(blocks, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, block_bytes)),
              [&](int64_t b0, int64_t b1) {
                for (int64_t b = b0; b < b1; ++b) {
                  const int64_t n0 = b * kLanes;
                  const int nr = static_cast<int>(std::min<int64_t>(kLanes, n_rows - n0));
                  if (m_rows == 1) {
                    GemvBlock<B, G, 1>(x, 1, w, n0, nr, y, ldy);
                  } else {
                    GemvBlock<B, G, 0>(x, m_rows, w, n0, nr, y, ldy);
                  }
                }
              });
}

template <int B>
void GemvBits(const ActRows& x, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  switch (w.group_size) {
    case 32:
      return GemvAll<B, 32>(x, m_rows, w, y, ldy);
    case 64:
      return GemvAll<B, 64>(x, m_rows, w, y, ldy);
    case 128:
      return GemvAll<B, 128>(x, m_rows, w, y, ldy);
    default:
      G4_CHECK_MSG(false, "[cpu] GemvAffine: unsupported group size");
  }
}

}  // namespace

ActLayout GemvLayout(int bits) { return G4_ISA_AVX2 && bits == 4 ? ActLayout::kSplit : ActLayout::kNatural; }

int64_t GemvUnitCols(int bits) {
#if G4_ISA_AVX2
  return bits == 4 ? Unit<4>::kCols : bits == 8 ? Unit<8>::kCols : 4 * kLanes;
#else
  return kChunk;
#endif
}

int64_t PaddedCols(int64_t k, int bits) {
  const int64_t unit = GemvUnitCols(bits);
  return (k + unit - 1) / unit * unit;
}

void GemvAffineInt8(const ActRows& x, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  G4_CHECK_MSG(m_rows <= kGemvMaxRows, "[cpu] GemvAffine: too many input rows");
  switch (w.bits) {
    case 2:
      return GemvBits<2>(x, m_rows, w, y, ldy);
    case 3:
      return GemvBits<3>(x, m_rows, w, y, ldy);
    case 4:
      return GemvBits<4>(x, m_rows, w, y, ldy);
    case 5:
      return GemvBits<5>(x, m_rows, w, y, ldy);
    case 6:
      return GemvBits<6>(x, m_rows, w, y, ldy);
    case 8:
      return GemvBits<8>(x, m_rows, w, y, ldy);
    default:
      G4_CHECK_MSG(false, "[cpu] GemvAffine: unsupported bit width");
  }
}

void GemvAffine(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  G4_CHECK_MSG(m_rows <= kGemvMaxRows, "[cpu] GemvAffine: too many input rows");
  const int64_t k = w.cols, gpr = w.groups_per_row();
  const int64_t kpad = PaddedCols(k, w.bits);
  int8_t* q = reinterpret_cast<int8_t*>(ThreadScratch(ScratchSlot::kInput, (m_rows * kpad + 3) / 4));
  float* dxs = ThreadScratch(ScratchSlot::kRowScales, 2 * m_rows * gpr);
  QuantizeActRows(x, ldx, m_rows, k, w.group_size, GemvLayout(w.bits), GemvUnitCols(w.bits), kpad, q, kpad,
                  dxs, dxs + m_rows * gpr, gpr);
  GemvAffineInt8(ActRows{q, kpad, dxs, dxs + m_rows * gpr, gpr}, m_rows, w, y, ldy);
}

G4_CPU_END
