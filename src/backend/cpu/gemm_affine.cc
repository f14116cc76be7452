// Blocked matrix product over MLX affine weights (prefill, batches), in the
// integer scheme of affine_int8.h, so every output is bit-identical to what
// the matrix-vector kernels give for the same input row.
//
// SIMD variants:
//  - the input rows are quantized once (int8, kOctet layout for 4-bit
//    codes, else column order), spread over the team;
//  - a tile of weight rows is unpacked once into a panel: per group, per
//    four-column quad, one vector of kLanes rows x 4 u8 codes (a transpose
//    of the codes' 32-bit words), and its scales and biases as float in the
//    same row-per-lane order;
//  - a register-tiled kernel takes kMr input rows x kNb panels of kLanes
//    rows: per quad, kNb vector loads and kMr broadcast 4-byte inputs feed
//    kMr * kNb four-way integer dot products (AVX-512 VNNI vpdpbusd: 64
//    multiply-adds each); at each group's end the exact integer sums go
//    through step 2's float update into per-output accumulators, which
//    stay in registers over all of K and are stored once.
// Work is split over weight tiles; when there are too few for the team,
// input rows are split too, at the cost of packing the tile once per split.
// Baseline: the matrix-vector kernel's plain loops, four rows at a time.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "backend/cpu/affine_int8.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/scratch.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

#if G4_ISA_AVX2

constexpr int kMr = G4_ISA_AVX512 ? 6 : 4;  // input rows per kernel call
constexpr int kNb = G4_ISA_AVX512 ? 2 : 1;  // panels (kLanes weight rows each) per kernel call
// Weight rows a task packs at once: its panel (rows x K bytes) stays in L2
// while every input row block passes over it.
constexpr int64_t kPanelBudgetBytes = 192 << 10;

// AVX2 8-bit codes: the panel holds each quad as two vectors, low and high
// nibbles, weighted 1 and 16 (vpmaddwd's second operand), so no 16-bit pair
// sum can saturate.
template <int B>
constexpr int kVecsPerQuad = (B == 8 && !G4_ISA_AVX512) ? 2 : 1;

// The panel of weight rows [n0, n0 + rows) (a multiple of kLanes; rows past
// the matrix are zero): per group g, quad t, row block j (and nibble half
// h), the vector at panel[((g * G / 4 + t) * blocks + j) * vpq + h]; scales
// and biases as float at st / bt[(g * blocks + j) * kLanes + lane].
template <int B, int G>
void PackPanel(const WeightMatrix& w, int64_t n0, int64_t rows, VI* panel, float* st, float* bt) {
  constexpr int kVpq = kVecsPerQuad<B>;
  constexpr int64_t kQuads = G / 4;
  const int64_t blocks = rows / kLanes, gpr = w.groups_per_row(), k = w.cols;
  const int64_t row_bytes = w.words_per_row() * 4;
  // Codes per unpacked unit, and quads per unit.
  constexpr int64_t kUnitCols = B == 4 ? 8 * kLanes : 4 * kLanes;
  constexpr int64_t kUnitBytes4 = kUnitCols * B / 8;
  const int64_t units = (k + kUnitCols - 1) / kUnitCols;
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t r0 = n0 + j * kLanes;
    const int nr = static_cast<int>(std::clamp<int64_t>(w.rows - r0, 0, kLanes));
    for (int64_t u = 0; u < units; ++u) {
      const int64_t off = u * kUnitBytes4;
      VI v[kLanes];
      for (int r = 0; r < kLanes; ++r) {
        if (r >= nr) {
          v[r] = VIZero();
          continue;
        }
        const uint8_t* p = reinterpret_cast<const uint8_t*>(w.codes + (r0 + r) * w.words_per_row()) + off;
        if constexpr (B == 4 || B == 8) {
          v[r] = LoadBytes(p, row_bytes - off);
        } else {
          Unit<B>::Load(p, row_bytes - off, &v[r]);
        }
      }
      TransposeWords(v);
      // Word o of this unit: columns [u * kUnitCols + o * cpw, ...), cpw = 8
      // (4-bit: an even quad and an odd quad) or 4 (one quad).
      for (int o = 0; o < kLanes; ++o) {
        const int64_t col = u * kUnitCols + o * (B == 4 ? 8 : 4);
        if (col >= k) break;
        const int64_t g = col / G;
        const int64_t t = (col - g * G) / 4;  // the (first) quad's index in its group
        VI* dst = panel + ((g * kQuads + t) * blocks + j) * kVpq;
        const VI m = SplatByte(0x0f);
        if constexpr (B == 4) {
          dst[0] = And(v[o], m);
          dst[blocks * kVpq] = And(ShiftRight16(v[o], 4), m);  // quad t + 1
        } else if constexpr (kVpq == 2) {
          dst[0] = And(v[o], m);
          dst[1] = And(ShiftRight16(v[o], 4), m);
        } else {
          dst[0] = v[o];
        }
      }
    }
    for (int64_t g0 = 0; g0 < gpr; g0 += kLanes) {
      const int ng = static_cast<int>(std::min<int64_t>(kLanes, gpr - g0));
      alignas(64) float s[kLanes * kLanes], b[kLanes * kLanes];
      TransposeGroupValues(w.scale_dtype, w.scales, gpr, r0, nr, g0, ng, s);
      TransposeGroupValues(w.scale_dtype, w.biases, gpr, r0, nr, g0, ng, b);
      for (int jj = 0; jj < ng; ++jj) {
        std::memcpy(st + ((g0 + jj) * blocks + j) * kLanes, s + jj * kLanes, kLanes * sizeof(float));
        std::memcpy(bt + ((g0 + jj) * blocks + j) * kLanes, b + jj * kLanes, kLanes * sizeof(float));
      }
    }
  }
}

// Outputs of MR input rows (x: quantized, row stride ldq; d / xs row stride
// ldg) x NB panels of the packed tile starting at panel block j0 (of
// `blocks`): y + m * ldy + b * kLanes, lanes < nr_last valid in the last
// panel.
template <int B, int G, int MR, int NB>
void Kernel(const int8_t* xq, int64_t ldq, const float* d, const float* xs, int64_t ldg,
            const void* panel_bytes, const float* st, const float* bt, int64_t blocks, int64_t j0,
            int64_t gpr, float* y, int64_t ldy, int nr_last) {
  const VI* panel = static_cast<const VI*>(panel_bytes);
  constexpr int kVpq = kVecsPerQuad<B>;
  constexpr int64_t kQuads = G / 4;
  VF acc[MR][NB];
  for (int m = 0; m < MR; ++m)
    for (int b = 0; b < NB; ++b) acc[m][b] = VZero();
  for (int64_t g = 0; g < gpr; ++g) {
    VI is[MR][NB];
    for (int m = 0; m < MR; ++m)
      for (int b = 0; b < NB; ++b) is[m][b] = VIZero();
    const VI* p = panel + (g * kQuads * blocks + j0) * kVpq;
    const int8_t* xg = xq + g * G;
    for (int64_t t = 0; t < kQuads; ++t, p += blocks * kVpq) {
      VI wv[NB][kVpq];
      for (int b = 0; b < NB; ++b)
        for (int h = 0; h < kVpq; ++h) wv[b][h] = VILoad(p + b * kVpq + h);
      for (int m = 0; m < MR; ++m) {
        int32_t word;
        std::memcpy(&word, xg + m * ldq + 4 * t, 4);
#if G4_ISA_AVX512
        const VI xb = _mm512_set1_epi32(word);
#else
        const VI xb = _mm256_set1_epi32(word);
#endif
        for (int b = 0; b < NB; ++b) {
          if constexpr (kVpq == 2) {
            const __m256i lo = _mm256_maddubs_epi16(wv[b][0], xb), hi = _mm256_maddubs_epi16(wv[b][1], xb);
            is[m][b] =
                _mm256_add_epi32(is[m][b], _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_set1_epi16(1)),
                                                            _mm256_madd_epi16(hi, _mm256_set1_epi16(16))));
          } else {
            is[m][b] = Dot4(is[m][b], wv[b][0], xb);
          }
        }
      }
    }
    for (int b = 0; b < NB; ++b) {
      const VF s = VLoad(st + (g * blocks + j0 + b) * kLanes),
               bias = VLoad(bt + (g * blocks + j0 + b) * kLanes);
      for (int m = 0; m < MR; ++m)
        acc[m][b] = GroupUpdate(acc[m][b], VICvt(is[m][b]), s, bias, d[m * ldg + g], xs[m * ldg + g]);
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int b = 0; b < NB; ++b) {
      float* o = y + m * ldy + b * kLanes;
      if (b < NB - 1 || nr_last == kLanes) {
        VStore(o, acc[m][b]);
      } else {
        VStoreN(o, acc[m][b], nr_last);
      }
    }
  }
}

template <int B, int G, int NB, int... Ms>
constexpr auto MakeKernelRow(std::integer_sequence<int, Ms...>) {
  using Fn = void (*)(const int8_t*, int64_t, const float*, const float*, int64_t, const void*, const float*,
                      const float*, int64_t, int64_t, int64_t, float*, int64_t, int);
  return std::array<Fn, sizeof...(Ms)>{&Kernel<B, G, Ms + 1, NB>...};
}

template <int B, int G>
void GemmTyped(const ActRows& x, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  constexpr int kVpq = kVecsPerQuad<B>;
  const int64_t n_rows = w.rows, k = w.cols, gpr = w.groups_per_row();
  // Panel tile: a multiple of kNb * kLanes rows within the budget.
  const int64_t step = kNb * kLanes;
  const int64_t tile =
      std::max<int64_t>(step, kPanelBudgetBytes / std::max<int64_t>(1, k * kVpq) / step * step);
  const int64_t n_tiles = (n_rows + tile - 1) / tile;
  const int64_t threads = TeamSize();
  const int64_t m_blocks = (m_rows + kMr - 1) / kMr;
  int64_t m_splits = 1;
  if (n_tiles < 2 * threads) m_splits = std::min(m_blocks, (2 * threads + n_tiles - 1) / n_tiles);
  const int64_t m_per_split = (m_blocks + m_splits - 1) / m_splits * kMr;
  const int64_t tasks = n_tiles * m_splits;
  static constexpr auto kFull = MakeKernelRow<B, G, kNb>(std::make_integer_sequence<int, kMr>());
  static constexpr auto kOne = MakeKernelRow<B, G, 1>(std::make_integer_sequence<int, kMr>());

  ParallelForDynamic(tasks, TeamSize(), [&](int64_t task) {
    const int64_t n0 = task / m_splits * tile;
    const int64_t rows = std::min(tile, n_rows - n0);
    const int64_t m_begin = task % m_splits * m_per_split;
    const int64_t m_end = std::min(m_rows, m_begin + m_per_split);
    if (m_begin >= m_end) return;
    const int64_t blocks = (rows + kLanes - 1) / kLanes;
    const int64_t panel_vecs = gpr * (G / 4) * blocks * kVpq;
    VI* panel = reinterpret_cast<VI*>(AlignedThreadScratch(ScratchSlot::kTile, panel_vecs * kLanes));
    float* st = AlignedThreadScratch(ScratchSlot::kRowScales, 2 * gpr * blocks * kLanes);
    float* bt = st + gpr * blocks * kLanes;
    PackPanel<B, G>(w, n0, blocks * kLanes, panel, st, bt);
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kMr) {
      const int mr = static_cast<int>(std::min<int64_t>(kMr, m_end - m0));
      const int8_t* xq = x.q + m0 * x.ldq;
      const float* d = x.d + m0 * x.ldg;
      const float* xs = x.xs + m0 * x.ldg;
      for (int64_t j = 0; j < blocks; j += kNb) {
        const int64_t r0 = n0 + j * kLanes;
        float* yo = y + m0 * ldy + r0;
        if (j + kNb <= blocks) {
          const int nr_last = static_cast<int>(std::min<int64_t>(kLanes, n_rows - (r0 + (kNb - 1) * kLanes)));
          kFull[mr - 1](xq, x.ldq, d, xs, x.ldg, panel, st, bt, blocks, j, gpr, yo, ldy, nr_last);
        } else {
          for (int64_t jj = j; jj < blocks; ++jj) {
            const int64_t rr = n0 + jj * kLanes;
            const int nr = static_cast<int>(std::min<int64_t>(kLanes, n_rows - rr));
            kOne[mr - 1](xq, x.ldq, d, xs, x.ldg, panel, st, bt, blocks, jj, gpr, y + m0 * ldy + rr, ldy, nr);
          }
        }
      }
    }
  });
}

template <int B>
void GemmBits(const ActRows& x, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  switch (w.group_size) {
    case 32:
      return GemmTyped<B, 32>(x, m_rows, w, y, ldy);
    case 64:
      return GemmTyped<B, 64>(x, m_rows, w, y, ldy);
    case 128:
      return GemmTyped<B, 128>(x, m_rows, w, y, ldy);
    default:
      G4_CHECK_MSG(false, "[cpu] GemmAffine: unsupported group size");
  }
}

#endif  // G4_ISA_AVX2

}  // namespace

void GemmAffine(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  const int64_t k = w.cols, gpr = w.groups_per_row();
#if G4_ISA_AVX2
  const ActLayout layout = w.bits == 4 ? ActLayout::kOctet : ActLayout::kNatural;
  const int64_t kq = k;
#else
  const ActLayout layout = GemvLayout(w.bits);
  const int64_t kq = PaddedCols(k, w.bits);
#endif
  int8_t* q = reinterpret_cast<int8_t*>(ThreadScratch(ScratchSlot::kInput, (m_rows * kq + 3) / 4));
  float* dxs = ThreadScratch(ScratchSlot::kAccumulators, 2 * m_rows * gpr);
  float* xs = dxs + m_rows * gpr;
  ParallelFor(m_rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, k)),
              [&](int64_t r0, int64_t r1) {
                QuantizeActRows(x + r0 * ldx, ldx, r1 - r0, k, w.group_size, layout, GemvUnitCols(w.bits), kq,
                                q + r0 * kq, kq, dxs + r0 * gpr, xs + r0 * gpr, gpr);
              });
#if G4_ISA_AVX2
  const ActRows xr{q, kq, dxs, xs, gpr};
  switch (w.bits) {
    case 2:
      return GemmBits<2>(xr, m_rows, w, y, ldy);
    case 3:
      return GemmBits<3>(xr, m_rows, w, y, ldy);
    case 4:
      return GemmBits<4>(xr, m_rows, w, y, ldy);
    case 5:
      return GemmBits<5>(xr, m_rows, w, y, ldy);
    case 6:
      return GemmBits<6>(xr, m_rows, w, y, ldy);
    case 8:
      return GemmBits<8>(xr, m_rows, w, y, ldy);
    default:
      G4_CHECK_MSG(false, "[cpu] GemmAffine: unsupported bit width");
  }
#else
  for (int64_t m0 = 0; m0 < m_rows; m0 += kGemvMaxRows) {
    const int64_t mr = std::min<int64_t>(kGemvMaxRows, m_rows - m0);
    GemvAffineInt8(ActRows{q + m0 * kq, kq, dxs + m0 * gpr, xs + m0 * gpr, gpr}, mr, w, y + m0 * ldy, ldy);
  }
#endif
}

G4_CPU_END
