// The integer scheme of affine_int8.cuh: QuantizeRows and AffineInt8MatMul.
//
// AffineInt8MatMul: a block takes 32 weight rows and up to MT input rows
// (MT <= 8) and walks the groups in rounds of 32:
//  - phase 1: warp w computes the integer group sums of weight rows
//    4w .. 4w + 3, lane l taking 32-column chunks l, l + 32, ... of the
//    round, so that a load instruction reads 512 contiguous bytes of one
//    row (4-bit); the codes are unpacked once for the MT input rows and
//    multiplied with dp4a (u8 codes x s8 inputs); a group's chunks lie in
//    adjacent lanes, added by shuffles. Sums, scales and biases go to
//    shared memory;
//  - phase 2: thread (m, r) continues output (m, r)'s float sequence over
//    the round's groups in order.
// The next round's loads are issued before phase 2 of the current one.
// One launch may serve several products of the same input (OutSet).
#include <algorithm>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "core/check.h"

namespace g4::cuda {

namespace {

constexpr int kRows = 32;   // weight rows per block (one per lane)
constexpr int kChunk = 32;  // groups per shared-memory round
constexpr int kWarps = 8;
constexpr int kMaxMt = 8;

// One warp per (row, group). Launched as a programmatic dependent, and lets
// its own dependent (the one-row kernel) start at once.
__global__ __launch_bounds__(256) void QuantizeKernel(const float* __restrict__ x, int64_t ldx,
                                                      const float* __restrict__ u, int64_t ldu,
                                                      const int32_t* __restrict__ src_rows, int32_t per_entry,
                                                      int64_t rows, int64_t k, int group, int bits,
                                                      QRows qr) {
  AllowDependents();  // a one-row MatMul may start requesting its weights
  WaitForPredecessor();
  const int64_t groups = k / group;
  const int64_t item = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  if (item >= rows * groups) return;  // whole warps leave together
  const int64_t r = item / groups, g = item % groups;
  const int64_t src = src_rows ? src_rows[r] / per_entry : r;
  QuantizeGroup(x + src * ldx + g * group, u ? u + src * ldu + g * group : nullptr, group, bits, g,
                threadIdx.x & 31, qr.q + r * qr.ldq, qr.d + r * qr.ldg + g, qr.xs + r * qr.ldg + g);
}

constexpr int kRowsPerWarp = kRows / kWarps;  // phase 1: warp w loads rows 4w .. 4w + 3 of the block

// Phase 1's loads for one round of kChunk groups starting at group c0
// (nch of them): for each of the warp's rows, lane l takes chunks
// (c0 * P) + 32 j + l (j < P) of 32 columns, so each load instruction of
// the warp reads one row's contiguous bytes, and the scale and bias of
// group c0 + l.
template <int B, int P>
struct ChunkLoads {
  uint32_t wd[kRowsPerWarp][P][B];
  float s[kRowsPerWarp], b[kRowsPerWarp];

  __device__ __forceinline__ void Load(const DevWeight& w, const int64_t (&rows)[kRowsPerWarp], int lane,
                                       int64_t c0, int nch) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int cl = 32 * j + lane;
        if (cl < nch * P) LoadChunkWords<B>(w, rows[r], c0 * P + cl, wd[r][j]);
      }
      if (lane < nch) {
        const int64_t gi = rows[r] * w.groups_per_row + c0 + lane;
        s[r] = LoadScale(w.scale_type, w.scales, gi);
        b[r] = LoadScale(w.scale_type, w.biases, gi);
      }
    }
  }
};

// Two blocks per SM where the registers allow (128 each).
template <int B, int MT, int P>
__global__ __launch_bounds__(kWarps * 32, P <= 2 ? 2 : 1) void AffineInt8Kernel(OutSet set, QRows qr,
                                                                                TileSource src) {
  __shared__ int isum[MT][kRows][kChunk + 1];
  __shared__ float sc[kRows][kChunk + 1], bi[kRows][kChunk + 1];
  __shared__ float ds[MT][kChunk], xss[MT][kChunk];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int which;
  AffineOut o = set.Of(blockIdx.x, which);
  DevWeight& w = o.w;
  int64_t x0;
  int count;
  if (!BlockTile<MT>(src, w, x0, count)) return;
  const int64_t n0 = static_cast<int64_t>(static_cast<int32_t>(blockIdx.x) - set.first_block[which]) * kRows;
  const int64_t groups = w.groups_per_row;
  int64_t rows[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) rows[r] = min(n0 + kRowsPerWarp * warp + r, w.rows - 1);
  ChunkLoads<B, P> ld;
  ld.Load(w, rows, lane, 0, static_cast<int>(min(static_cast<int64_t>(kChunk), groups)));
  // Phase 2's output: (input row warp, weight row n0 + lane).
  const int pm = warp;
  const int8_t* qrow[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) qrow[m] = qr.q + (x0 + min(m, count - 1)) * qr.ldq;
  float acc = 0.0f;

  for (int64_t c0 = 0; c0 < groups; c0 += kChunk) {
    const int nch = static_cast<int>(min(static_cast<int64_t>(kChunk), groups - c0));
    // Phase 1: the warp's rows, chunk 32 j + lane of the round; a group's
    // P chunks lie in P adjacent lanes, whose integer sums are added by
    // shuffles (exact in any order).
#pragma unroll
    for (int j = 0; j < P; ++j) {
      const int cl = 32 * j + lane;
      const bool valid = cl < nch * P;
      uint32_t quad[kRowsPerWarp][8];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) Unpack<B>(ld.wd[r][j], quad[r]);
      const int64_t col = (c0 * P + cl) * 32;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        uint4 a = make_uint4(0, 0, 0, 0), b = make_uint4(0, 0, 0, 0);
        if (valid) {
          const uint4* qp = reinterpret_cast<const uint4*>(qrow[m] + col);
          a = __ldg(qp), b = __ldg(qp + 1);
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          int s = 0;
          s = Dp4a(quad[r][0], a.x, s), s = Dp4a(quad[r][1], a.y, s), s = Dp4a(quad[r][2], a.z, s);
          s = Dp4a(quad[r][3], a.w, s), s = Dp4a(quad[r][4], b.x, s), s = Dp4a(quad[r][5], b.y, s);
          s = Dp4a(quad[r][6], b.z, s), s = Dp4a(quad[r][7], b.w, s);
#pragma unroll
          for (int off = 1; off < P; off *= 2) s += __shfl_down_sync(0xffffffffu, s, off);
          if (valid && lane % P == 0) isum[m][kRowsPerWarp * warp + r][cl / P] = s;
        }
      }
    }
    if (lane < nch) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        sc[kRowsPerWarp * warp + r][lane] = ld.s[r];
        bi[kRowsPerWarp * warp + r][lane] = ld.b[r];
      }
    }
    for (int t = threadIdx.x; t < MT * kChunk; t += kWarps * 32) {
      const int m = t / kChunk, gl = t % kChunk;
      if (gl >= nch) continue;
      const int64_t xr = x0 + min(m, count - 1);
      ds[m][gl] = qr.d[xr * qr.ldg + c0 + gl];
      xss[m][gl] = qr.xs[xr * qr.ldg + c0 + gl];
    }
    __syncthreads();
    // The next round's codes fly while phase 2 runs.
    if (c0 + kChunk < groups)
      ld.Load(w, rows, lane, c0 + kChunk,
              static_cast<int>(min(static_cast<int64_t>(kChunk), groups - c0 - kChunk)));
    // Phase 2: output (pm, n0 + lane), the round's groups in order.
    if (pm < MT) {
#pragma unroll 8
      for (int gl = 0; gl < nch; ++gl) {
        const float sd = __fmul_rn(sc[lane][gl], ds[pm][gl]);
        acc = __fmaf_rn(__int2float_rn(isum[pm][lane][gl]), sd, acc);
        acc = __fmaf_rn(bi[lane][gl], xss[pm][gl], acc);
      }
    }
    __syncthreads();
  }
  if (pm < count && n0 + lane < w.rows) o.y[(x0 + pm) * o.ldy + n0 + lane] = acc;
}

template <int B, int P>
void LaunchForPieces(int mt, const OutSet& set, const QRows& qr, const TileSource& src, int64_t tiles,
                     cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(set.first_block[set.n]), static_cast<unsigned>(tiles));
  switch (mt) {
    case 1:
      AffineInt8Kernel<B, 1, P><<<grid, kWarps * 32, 0, stream>>>(set, qr, src);
      break;
    case 2:
      AffineInt8Kernel<B, 2, P><<<grid, kWarps * 32, 0, stream>>>(set, qr, src);
      break;
    case 4:
      AffineInt8Kernel<B, 4, P><<<grid, kWarps * 32, 0, stream>>>(set, qr, src);
      break;
    default:
      AffineInt8Kernel<B, 8, P><<<grid, kWarps * 32, 0, stream>>>(set, qr, src);
      break;
  }
  G4_CUDA_LAUNCHED();
}

}  // namespace

void QuantizeRows(const float* x, int64_t ldx, const float* u, int64_t ldu, const int32_t* src_rows,
                  int32_t per_entry, int64_t rows, int64_t k, int group, int bits, const QRows& qr,
                  cudaStream_t stream) {
  G4_CHECK_MSG(group == 32 || group == 64 || group == 128, "[cuda] QuantizeRows: group size");
  const int64_t warps = rows * (k / group);
  if (warps == 0) return;
  const int64_t blocks = (warps + 7) / 8;
  G4_CHECK_MSG(blocks < (int64_t{1} << 31), "[cuda] QuantizeRows: too many rows");
  LaunchDependent(QuantizeKernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, x, ldx, u, ldu,
                  src_rows, per_entry, rows, k, group, bits, qr);
}

void AffineInt8MatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, const TileSource& src,
                      int mt, int64_t tiles, cudaStream_t stream) {
  G4_CHECK_MSG(mt == 1 || mt == 2 || mt == 4 || mt == kMaxMt, "[cuda] AffineInt8MatMul: tile rows");
  G4_CHECK_MSG(tiles <= 65535, "[cuda] MatMul: too many input rows for one launch");
  G4_CHECK_MSG(src.table == nullptr || outs.size() == 1,
               "[cuda] AffineInt8MatMul: one product for expert tiles");
  const OutSet set = MakeOutSet(outs, kRows, "[cuda] AffineInt8MatMul");
  if (tiles == 0 || set.first_block[set.n] == 0) return;
  ForAffineFormat(bits, outs[0].w.group,
                  [&]<int B, int P>() { LaunchForPieces<B, P>(mt, set, qr, src, tiles, stream); });
}

}  // namespace g4::cuda
