// AffineInt8MmaMatMul: the integer scheme of affine_int8.cuh on the int8
// tensor cores (mma.sync m16n8k32, u8 codes x s8 inputs, exact int32
// sums), so its outputs are bitwise AffineInt8MatMul's and the CPU
// backend's.
//
// A block of WN x WM warps takes 16 WN weight rows and BM = 8 NI WM input
// rows (shapes 128 x 64, 64 x 32, 32 x 8) and walks the columns in k-tiles
// of 256 (eight 32-column chunks; 128 for groups of 32), kStages deep: a tile's packed codes and
// quantized inputs arrive by cp.async into shared memory; the scales,
// biases and the inputs' d and xs of the next tile are read into registers
// while the current one computes, and stored as floats beside it (by
// cp.async too, 4 bytes at a time, they made the kernel 1.5x slower on the
// H200). Warp (wn, wm) owns 16 weight rows x 8 NI input rows of the block:
// per chunk it unpacks its A fragments (weight rows, mma rows) straight
// from the packed words and takes its B fragments (input rows, mma
// columns) as 8-byte words. Inside a chunk the order of
// the 32 columns is free (an integer sum is exact in any order): thread t
// of a quad takes the chunk's QPos-ordered positions 8t .. 8t + 7 in both
// operands (A: quad words 2t and 2t + 1 of Unpack<B>'s, B: bytes 8t .. 8t
// + 7 of the quantized row), so the mma's k slots t and 16 + t pair the
// same columns. After a group's chunks, each thread continues the float
// sequence of each of its outputs, y = fma(float(isum), s * d, y); y =
// fma(b, xs, y), in group order: the per-output sequence every kernel of
// the scheme computes.
#include <cstdlib>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace g4::cuda {

namespace {

// 32-column chunks per k-tile: 8, or 4 for groups of 32 (whose tile of 8
// groups' scalars would not fit 128 registers beside the rest).
constexpr int TileChunks(int gp) { return gp == 1 ? 4 : 8; }
constexpr int kStages = 3;
// Words per input row of a stage: the tile's, + 8 (64-bit reads hit
// distinct banks).
constexpr int InStride(int kc) { return 8 * kc + 8; }

// Words per weight row of a stage: the tile's kc B words plus
// padding that puts a fragment load's 8 rows x 4 lanes in distinct banks:
// at least one padding word (3-, 5- and 6-bit fragments read one word past
// their chunk); 4 mod 8 words (8 mod 16 for 8-bit, whose fragments are
// 64-bit reads). With 4 chunks a tile: 12, 20, 20, 28, 28 and 40 words.
constexpr int CodeStride(int b, int kc) {
  const int m = b == 8 ? 16 : 8, r = b == 8 ? 8 : 4;
  int s = kc * b + 1;
  while (s % m != r) ++s;
  return s;
}

// WN x WM warps: warp (wn, wm) takes weight rows 16 wn .. + 16 and input
// rows 8 NI wm .. + 8 NI of the block. At most 128 registers a thread, so
// 512 / kThreads blocks fit an SM.
template <int B, int GP, int WN, int WM, int NI>
struct MmaShape {
  static constexpr int kThreads = 32 * WN * WM;
  static constexpr int kBlocksPerSm = 512 / kThreads;
  static constexpr int BN = WN * 16;                // weight rows per block
  static constexpr int BM = WM * 8 * NI;            // input rows per block
  static constexpr int KC = TileChunks(GP);          // chunks per k-tile
  static constexpr int GT = KC / GP;                 // groups per k-tile
  static constexpr int CS = CodeStride(B, KC);
  static constexpr int IS = InStride(KC);
  static constexpr int code_words = BN * CS;
  static constexpr int in_words = BM * IS;
  static constexpr int side = (BN + BM) * GT * 2;   // s, b per weight row; d, xs per input row
  static constexpr int side_per_thread = (side + kThreads - 1) / kThreads;
  static constexpr int stage_words = code_words + in_words + side;
  static constexpr size_t smem_bytes = static_cast<size_t>(stage_words) * 4 * kStages;
  static_assert(stage_words % 4 == 0, "stages stay 16-byte aligned");
};

// Words 2t and 2t + 1 of Unpack<B>'s eight for the chunk whose B packed
// words start at w (shared memory): its QPos positions 8t .. 8t + 7.
template <int B>
__device__ __forceinline__ void UnpackPair(const uint32_t* w, int t, uint32_t& lo, uint32_t& hi) {
  if constexpr (B == 4) {
    const uint32_t v = w[t];
    lo = v & 0x0f0f0f0fu;
    hi = (v >> 4) & 0x0f0f0f0fu;
  } else if constexpr (B == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(w + 2 * t);
    lo = v.x;
    hi = v.y;
  } else if constexpr (B == 2) {
    const uint32_t v = w[t >> 1];
    const int sh = (t & 1) * 4;
    lo = (v >> sh) & 0x03030303u;
    hi = (v >> (sh + 2)) & 0x03030303u;
  } else {
    // Codes 8t .. 8t + 7 of the bit stream: bits 8tB .. 8tB + 8B - 1, within
    // two words for B <= 6 (the second may be the next chunk's or padding).
    const int o = 8 * t * B;
    const uint64_t v = ((static_cast<uint64_t>(w[(o >> 5) + 1]) << 32) | w[o >> 5]) >> (o & 31);
    constexpr uint32_t kMask = (1u << B) - 1;
    lo = 0;
    hi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lo |= (static_cast<uint32_t>(v >> (i * B)) & kMask) << (8 * i);
      hi |= (static_cast<uint32_t>(v >> ((i + 4) * B)) & kMask) << (8 * i);
    }
  }
}

// At most 128 registers a thread: 512 threads per SM.
template <int B, int GP, int WN, int WM, int NI>
__global__ __launch_bounds__(MmaShape<B, GP, WN, WM, NI>::kThreads, MmaShape<B, GP, WN, WM, NI>::kBlocksPerSm) void
AffineMmaKernel(OutSet set, QRows qr, TileSource src) {
  using S = MmaShape<B, GP, WN, WM, NI>;
  constexpr int kThreads = S::kThreads;
  uint32_t* smem = reinterpret_cast<uint32_t*>(DynamicShared());
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wn = warp % WN, wm = warp / WN;
  int which;
  AffineOut o = set.Of(blockIdx.x, which);
  DevWeight& w = o.w;
  FollowPredecessor();
  int64_t x0;
  int count;
  if (!BlockTile<S::BM>(src, w, x0, count)) return;
  const int64_t n0 = static_cast<int64_t>(static_cast<int32_t>(blockIdx.x) - set.first_block[which]) * S::BN;
  const int64_t groups = w.groups_per_row, chunks = groups * GP;
  const int64_t ktiles = (chunks + S::KC - 1) / S::KC;
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);

  // Tile kt's codes and inputs into stage st (cp.async; the caller commits).
  const auto produce = [&](int64_t kt, int st) {
    uint32_t* cs = smem + st * S::stage_words;
    uint32_t* in = cs + S::code_words;
    const int nck = static_cast<int>(min(static_cast<int64_t>(S::KC), chunks - kt * S::KC));
    if (w.vec16 && nck == S::KC) {
      constexpr int kPieces = B * S::KC / 4;  // 16-byte pieces per row
      for (int e = tid; e < S::BN * kPieces; e += kThreads) {
        const int r = e / kPieces, p = e % kPieces;
        const int64_t row = min(n0 + r, w.rows - 1);
        CpAsync16(cs + r * S::CS + 4 * p, codes + row * w.row_bytes + kt * (4 * B * S::KC) + 16 * p);
      }
    } else {
      const int words = nck * B;
      for (int e = tid; e < S::BN * words; e += kThreads) {
        const int r = e / words, p = e % words;
        const int64_t row = min(n0 + r, w.rows - 1);
        CpAsync4(cs + r * S::CS + p, codes + row * w.row_bytes + kt * (4 * B * S::KC) + 4 * p);
      }
    }
    const int pieces = 2 * nck;  // 16-byte pieces of an input row's tile
    for (int e = tid; e < S::BM * pieces; e += kThreads) {
      const int m = e / pieces, p = e % pieces;
      const int64_t xr = x0 + min(m, count - 1);
      CpAsync16(in + m * S::IS + 4 * p, qr.q + xr * qr.ldq + kt * (32 * S::KC) + 16 * p);
    }
  };
  // Tile kt's scalars, element i of the stage's side area at side[i]:
  // s[r][gl], b[r][gl], d[m][gl], xs[m][gl].
  const auto side_load = [&](int64_t kt, float (&v)[S::side_per_thread]) {
#pragma unroll
    for (int j = 0; j < S::side_per_thread; ++j) {
      const int e = tid + j * kThreads;
      v[j] = 0.0f;
      if (e >= S::side) continue;
      int part = e / (S::BN * S::GT), rem = e % (S::BN * S::GT);
      if (part < 2) {
        const int r = rem / S::GT, gl = rem % S::GT;
        const int64_t gg = kt * S::GT + gl;
        if (gg >= groups) continue;
        const int64_t row = min(n0 + r, w.rows - 1);
        v[j] = LoadScale(w.scale_type, part == 0 ? w.scales : w.biases, row * w.groups_per_row + gg);
      } else {
        const int e2 = e - 2 * S::BN * S::GT;
        part = e2 / (S::BM * S::GT);
        rem = e2 % (S::BM * S::GT);
        const int m = rem / S::GT, gl = rem % S::GT;
        const int64_t gg = kt * S::GT + gl;
        if (gg >= groups) continue;
        const int64_t xr = x0 + min(m, count - 1);
        v[j] = (part == 0 ? qr.d : qr.xs)[xr * qr.ldg + gg];
      }
    }
  };
  const auto side_store = [&](int st, const float (&v)[S::side_per_thread]) {
    float* side = reinterpret_cast<float*>(smem + st * S::stage_words + S::code_words + S::in_words);
#pragma unroll
    for (int j = 0; j < S::side_per_thread; ++j) {
      const int e = tid + j * kThreads;
      if (e < S::side) side[e] = v[j];
    }
  };

  int acc[NI][4];
  float y[NI][4];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[ni][e] = 0, y[ni][e] = 0.0f;

#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < ktiles) produce(st, st);
    CpAsyncCommit();
  }
  float sv[S::side_per_thread];
  side_load(0, sv);
  side_store(0, sv);

  const int row_base = wn * 16 + g;  // + 8 h: this thread's weight rows of the block
  const int tok_base = wm * 8 * NI;  // + 8 ni + g (B fragments), + 8 ni + 2t + j (outputs)
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();
    if (kt + kStages - 1 < ktiles) produce(kt + kStages - 1, static_cast<int>((kt + kStages - 1) % kStages));
    CpAsyncCommit();
    if (kt + 1 < ktiles) side_load(kt + 1, sv);

    const int st = static_cast<int>(kt % kStages);
    const uint32_t* cs = smem + st * S::stage_words;
    const uint32_t* in = cs + S::code_words;
    const float* side = reinterpret_cast<const float*>(in + S::in_words);
    const int nck = static_cast<int>(min(static_cast<int64_t>(S::KC), chunks - kt * S::KC));
#pragma unroll 1
    for (int gl = 0; gl < S::GT; ++gl) {  // not unrolled: one group's registers at a time
      if (gl * GP >= nck) break;
#pragma unroll
      for (int c = 0; c < GP; ++c) {
        const int chunk = gl * GP + c;
        uint32_t a[4];
        const uint32_t* r0 = cs + row_base * S::CS + chunk * B;
        UnpackPair<B>(r0, t, a[0], a[2]);
        UnpackPair<B>(r0 + 8 * S::CS, t, a[1], a[3]);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const uint2 b = *reinterpret_cast<const uint2*>(in + (tok_base + 8 * ni + g) * S::IS + 8 * chunk + 2 * t);
          MmaU8S8(acc[ni], a, b.x, b.y);
        }
      }
      // The group's sums join each output's float sequence.
      float s[2], bi[2], d[NI][2], xs[NI][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row_base + 8 * h;
        s[h] = side[r * S::GT + gl];
        bi[h] = side[S::BN * S::GT + r * S::GT + gl];
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int m = tok_base + 8 * ni + 2 * t + j;
          d[ni][j] = side[2 * S::BN * S::GT + m * S::GT + gl];
          xs[ni][j] = side[2 * S::BN * S::GT + S::BM * S::GT + m * S::GT + gl];
        }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1, j = e & 1;
          const float sd = __fmul_rn(s[h], d[ni][j]);
          y[ni][e] = __fmaf_rn(__int2float_rn(acc[ni][e]), sd, y[ni][e]);
          y[ni][e] = __fmaf_rn(bi[h], xs[ni][j], y[ni][e]);
          acc[ni][e] = 0;
        }
    }
    if (kt + 1 < ktiles) side_store(static_cast<int>((kt + 1) % kStages), sv);
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = n0 + row_base + 8 * (e >> 1);
      const int m = tok_base + 8 * ni + 2 * t + (e & 1);
      if (m < count && row < w.rows) o.y[(x0 + m) * o.ldy + row] = y[ni][e];
    }
}

// The launch of products `outs` (1 to kMaxAffineOuts) in one shape.
template <int B, int GP, int WN, int WM, int NI>
void LaunchMma(std::span<const AffineOut> outs, const QRows& qr, const TileSource& src, int64_t tiles,
               cudaStream_t stream) {
  using S = MmaShape<B, GP, WN, WM, NI>;
  const OutSet set = MakeOutSet(outs, S::BN, "[cuda] AffineInt8MmaMatMul");
  if (tiles == 0 || set.first_block[set.n] == 0) return;
  static bool configured = false;  // one thread drives the backend
  if (!configured) {
    G4_CUDA_CHECK(cudaFuncSetAttribute(AffineMmaKernel<B, GP, WN, WM, NI>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(S::smem_bytes)));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>(set.first_block[set.n]), static_cast<unsigned>(tiles));
  LaunchDependent(AffineMmaKernel<B, GP, WN, WM, NI>, grid, dim3(S::kThreads), S::smem_bytes, stream, set, qr, src);
}

// The shapes: 128 weight rows x 64 input rows (16 warps), 64 x 32 (8
// warps), 32 x 8 (2 warps: small launches still fill the GPU).
template <int B, int GP>
void LaunchForRows(int bm, std::span<const AffineOut> outs, const QRows& qr, const TileSource& src, int64_t tiles,
                   cudaStream_t stream) {
  if (bm == 64) return LaunchMma<B, GP, 8, 2, 4>(outs, qr, src, tiles, stream);
  if (bm == 32) return LaunchMma<B, GP, 4, 2, 2>(outs, qr, src, tiles, stream);
  return LaunchMma<B, GP, 2, 1, 1>(outs, qr, src, tiles, stream);
}

}  // namespace

int AffineMmaTileRows(int64_t rows) { return rows <= 8 ? 8 : rows <= 32 ? 32 : 64; }

AffineMmaBlock AffineMmaBlockFor(int64_t rows) {
  const auto of = []<typename S>(S) { return AffineMmaBlock{S::BN, S::kBlocksPerSm}; };
  const int bm = AffineMmaTileRows(rows);  // LaunchForRows' shapes
  return bm == 64   ? of(MmaShape<4, 2, 8, 2, 4>{})
         : bm == 32 ? of(MmaShape<4, 2, 4, 2, 2>{})
                    : of(MmaShape<4, 2, 2, 1, 1>{});
}

void AffineInt8MmaMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, const TileSource& src, int bm,
                         int64_t tiles, cudaStream_t stream) {
  G4_CHECK_MSG(bm == 8 || bm == 32 || bm == 64, "[cuda] AffineInt8MmaMatMul: tile rows");
  G4_CHECK_MSG(tiles <= 65535, "[cuda] MatMul: too many input rows for one launch");
  G4_CHECK_MSG(src.table == nullptr || outs.size() == 1,
               "[cuda] AffineInt8MmaMatMul: one product for expert tiles");
  ForAffineFormat(bits, outs[0].w.group,
                  [&]<int B, int P>() { LaunchForRows<B, P>(bm, outs, qr, src, tiles, stream); });
}

int AffineMmaMinRows() {
  static const int min_rows = [] {
    const char* e = std::getenv("G4_CUDA_MMA_MIN_ROWS");
    const int v = e ? std::atoi(e) : 0;
    return v > 0 ? v : 9;
  }();
  return min_rows;
}

}  // namespace g4::cuda
