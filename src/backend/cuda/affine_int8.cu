// The integer scheme of affine_int8.cuh: QuantizeRows and AffineInt8MatMul.
//
// AffineInt8MatMul: a block takes 32 weight rows and up to MT input rows
// (MT <= 8) and walks the groups in chunks of 32:
//  - phase 1: the 8 warps compute the chunk's integer group sums, warp w
//    taking groups w, w + 8, ... of the chunk, lane r weight row r (so the
//    quantized inputs a warp reads are the same for all its lanes: one
//    broadcast load); a (row, group) item's codes are unpacked once for the
//    MT input rows and multiplied with dp4a (u8 codes x s8 inputs). Sums,
//    scales and biases go to shared memory;
//  - phase 2: thread (m, r) continues output (m, r)'s float sequence over
//    the chunk's groups in order.
// A thread's four items issue their code loads together, and the next
// chunk's loads are issued before phase 2 of the current one, which keeps
// enough bytes in flight for a one-row decode.
#include <algorithm>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace g4::cuda {

namespace {

constexpr int kRows = 32;     // weight rows per block (one per lane)
constexpr int kChunk = 32;    // groups per shared-memory round
constexpr int kWarps = 8;
constexpr int kItemsPerThread = kRows * kChunk / (kWarps * 32);  // 4
constexpr int kMaxMt = 8;

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

// Where quantized column c of a row goes (affine_int8.cuh).
__device__ __forceinline__ int64_t QPos(int bits, int64_t c) {
  if (bits == 4) {
    const int o = static_cast<int>(c & 7);
    return c - o + ((o & 1) ? 4 + (o >> 1) : (o >> 1));
  }
  if (bits == 2) {
    const int o = static_cast<int>(c & 15);
    return c - o + (o & 3) * 4 + (o >> 2);
  }
  return c;
}

// x86 cvtps2dq in round-to-nearest-even: NaN and out-of-range give INT_MIN.
__device__ __forceinline__ int CvtLikeX86(float v) {
  return fabsf(v) < 2147483648.0f ? __float2int_rn(v) : static_cast<int>(0x80000000u);
}

// One warp per (row, group): lane l takes elements l, l + 32, ... of it.
__global__ __launch_bounds__(256) void QuantizeKernel(const float* __restrict__ x, int64_t ldx,
                                                      const int32_t* __restrict__ src_rows, int32_t per_entry,
                                                      int64_t rows, int64_t k, int group, int bits, QRows qr) {
  const int64_t groups = k / group;
  const int64_t item = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  if (item >= rows * groups) return;  // whole warps leave together
  const int lane = threadIdx.x & 31;
  const int64_t r = item / groups, g = item % groups;
  const int64_t src = src_rows ? src_rows[r] / per_entry : r;
  const float* xg = x + src * ldx + g * group;
  const int per = group / 32;  // 1, 2 or 4
  float v[4];
  uint32_t amax = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = j < per ? xg[j * 32 + lane] : 0.0f;
    amax = max(amax, __float_as_uint(v[j]) & 0x7fffffffu);
  }
  amax = __reduce_max_sync(0xffffffffu, amax);
  const float a = __uint_as_float(amax);
  const bool finite = amax < 0x7f800000u;
  const float d = finite ? __fdiv_rn(a, 127.0f) : __uint_as_float(0x7fc00000u);
  const float inv = finite && amax != 0 ? __fdiv_rn(127.0f, a) : 0.0f;
  int sum = 0;
  int8_t* qrow = qr.q + r * qr.ldq;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (j >= per) break;
    const int qi = min(127, max(-127, CvtLikeX86(__fmul_rn(v[j], inv))));
    sum += qi;
    qrow[QPos(bits, g * group + j * 32 + lane)] = static_cast<int8_t>(qi);
  }
  sum = __reduce_add_sync(0xffffffffu, sum);
  if (lane == 0) {
    qr.d[r * qr.ldg + g] = d;
    qr.xs[r * qr.ldg + g] = __fmul_rn(__int2float_rn(sum), d);
  }
}

// acc + the four products of u8 codes (a) and s8 inputs (b).
__device__ __forceinline__ int Dp4a(uint32_t a, uint32_t b, int acc) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(acc));
  return d;
}

// 32 columns' codes (B words) as 8 words of 4 u8 codes each, in QPos order.
template <int B>
__device__ __forceinline__ void Unpack(const uint32_t (&wd)[B], uint32_t (&quad)[8]) {
  if constexpr (B == 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      quad[2 * j] = wd[j] & 0x0f0f0f0fu;
      quad[2 * j + 1] = (wd[j] >> 4) & 0x0f0f0f0fu;
    }
  } else if constexpr (B == 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) quad[j] = wd[j];
  } else if constexpr (B == 2) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int s = 0; s < 4; ++s) quad[4 * j + s] = (wd[j] >> (2 * s)) & 0x03030303u;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int bit = (4 * j + i) * B, wi = bit >> 5, sh = bit & 31;
        uint32_t c = wd[wi] >> sh;
        if (sh + B > 32) c |= wd[wi + 1] << (32 - sh);
        word |= (c & ((1u << B) - 1)) << (8 * i);
      }
      quad[j] = word;
    }
  }
}

// The code words of a thread's items (lane's row, groups warp + 8 i of the
// chunk at c0; nch groups), all P pieces, and their scales and biases.
template <int B, int P>
struct ChunkLoads {
  uint32_t wd[kItemsPerThread][P][B];
  float s[kItemsPerThread], b[kItemsPerThread];

  __device__ __forceinline__ void Load(const DevWeight& w, int64_t row, int warp, int64_t c0, int nch) {
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      const int gl = warp + kWarps * i;
      if (gl >= nch) continue;
#pragma unroll
      for (int p = 0; p < P; ++p) LoadChunkWords<B>(w, row, (c0 + gl) * P + p, wd[i][p]);
      const int64_t gi = row * w.groups_per_row + c0 + gl;
      s[i] = LoadScale(w.scale_type, w.scales, gi);
      b[i] = LoadScale(w.scale_type, w.biases, gi);
    }
  }
};

template <int B, int MT, int P>
__global__ __launch_bounds__(kWarps * 32) void AffineInt8Kernel(DevWeight w, QRows qr, TileSource src,
                                                                 float* __restrict__ y, int64_t ldy) {
  __shared__ int isum[MT][kRows][kChunk + 1];
  __shared__ float sc[kRows][kChunk + 1], bi[kRows][kChunk + 1];
  __shared__ float ds[MT][kChunk], xss[MT][kChunk];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t x0;
  int count;
  if (src.table) {
    const int tile = blockIdx.y;
    if (tile >= *src.num_tiles) return;
    const int e = src.tile_expert[tile];
    x0 = src.tile_start[tile];
    count = src.tile_count[tile];
    w.data = src.table[3 * e];
    w.scales = src.table[3 * e + 1];
    w.biases = src.table[3 * e + 2];
    w.vec16 = w.vec16 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
  } else {
    x0 = static_cast<int64_t>(blockIdx.y) * MT;
    count = static_cast<int>(min(static_cast<int64_t>(MT), src.M - x0));
  }
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t groups = w.groups_per_row;
  // Phase 1's weight row (lane); phase 2's output is (input row warp, weight row n0 + lane).
  const int64_t row = min(n0 + lane, w.rows - 1);
  const int pm = warp;
  const int8_t* qrow[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) qrow[m] = qr.q + (x0 + min(m, count - 1)) * qr.ldq;
  float acc = 0.0f;

  ChunkLoads<B, P> ld;
  ld.Load(w, row, warp, 0, static_cast<int>(min(static_cast<int64_t>(kChunk), groups)));
  for (int64_t c0 = 0; c0 < groups; c0 += kChunk) {
    const int nch = static_cast<int>(min(static_cast<int64_t>(kChunk), groups - c0));
    // Phase 1: items (lane, group warp + 8 i).
#pragma unroll
    for (int i = 0; i < kItemsPerThread; ++i) {
      const int gl = warp + kWarps * i;
      if (gl >= nch) continue;
      int sums[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) sums[m] = 0;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        uint32_t quad[8];
        Unpack<B>(ld.wd[i][p], quad);
        const int64_t col = ((c0 + gl) * P + p) * 32;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const uint4* qp = reinterpret_cast<const uint4*>(qrow[m] + col);
          const uint4 a = __ldg(qp), b = __ldg(qp + 1);
          int s = sums[m];
          s = Dp4a(quad[0], a.x, s), s = Dp4a(quad[1], a.y, s), s = Dp4a(quad[2], a.z, s), s = Dp4a(quad[3], a.w, s);
          s = Dp4a(quad[4], b.x, s), s = Dp4a(quad[5], b.y, s), s = Dp4a(quad[6], b.z, s), s = Dp4a(quad[7], b.w, s);
          sums[m] = s;
        }
      }
#pragma unroll
      for (int m = 0; m < MT; ++m) isum[m][lane][gl] = sums[m];
      sc[lane][gl] = ld.s[i];
      bi[lane][gl] = ld.b[i];
    }
    for (int t = threadIdx.x; t < MT * kChunk; t += kWarps * 32) {
      const int m = t / kChunk, gl = t % kChunk;
      if (gl >= nch) continue;
      const int64_t xr = x0 + min(m, count - 1);
      ds[m][gl] = qr.d[xr * qr.ldg + c0 + gl];
      xss[m][gl] = qr.xs[xr * qr.ldg + c0 + gl];
    }
    __syncthreads();
    // The next chunk's codes fly while phase 2 runs.
    if (c0 + kChunk < groups) {
      ld.Load(w, row, warp, c0 + kChunk, static_cast<int>(min(static_cast<int64_t>(kChunk), groups - c0 - kChunk)));
    }
    // Phase 2: output (pm, n0 + lane), the chunk's groups in order.
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
  if (pm < count && n0 + lane < w.rows) y[(x0 + pm) * ldy + n0 + lane] = acc;
}

template <int B, int P>
void LaunchForPieces(int mt, const DevWeight& w, const QRows& qr, const TileSource& src, int64_t tiles, float* y,
                     int64_t ldy, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.rows + kRows - 1) / kRows), static_cast<unsigned>(tiles));
  switch (mt) {
    case 1: AffineInt8Kernel<B, 1, P><<<grid, kWarps * 32, 0, stream>>>(w, qr, src, y, ldy); break;
    case 2: AffineInt8Kernel<B, 2, P><<<grid, kWarps * 32, 0, stream>>>(w, qr, src, y, ldy); break;
    case 4: AffineInt8Kernel<B, 4, P><<<grid, kWarps * 32, 0, stream>>>(w, qr, src, y, ldy); break;
    default: AffineInt8Kernel<B, 8, P><<<grid, kWarps * 32, 0, stream>>>(w, qr, src, y, ldy); break;
  }
  G4_CUDA_LAUNCHED();
}

template <int B>
void LaunchForBits(int mt, const DevWeight& w, const QRows& qr, const TileSource& src, int64_t tiles, float* y,
                   int64_t ldy, cudaStream_t stream) {
  switch (w.group) {
    case 32: return LaunchForPieces<B, 1>(mt, w, qr, src, tiles, y, ldy, stream);
    case 64: return LaunchForPieces<B, 2>(mt, w, qr, src, tiles, y, ldy, stream);
    default: return LaunchForPieces<B, 4>(mt, w, qr, src, tiles, y, ldy, stream);
  }
}

}  // namespace

size_t QRowsBytes(int64_t rows, int64_t k, int group) {
  const int64_t groups = k / group;
  return Align256(static_cast<size_t>(rows * k)) + 2 * Align256(static_cast<size_t>(rows * groups) * 4);
}

QRows QRowsIn(void* scratch, int64_t rows, int64_t k, int group) {
  const int64_t groups = k / group;
  char* base = static_cast<char*>(scratch);
  QRows qr;
  qr.q = reinterpret_cast<int8_t*>(base);
  qr.ldq = k;
  qr.d = reinterpret_cast<float*>(base + Align256(static_cast<size_t>(rows * k)));
  qr.xs = qr.d + Align256(static_cast<size_t>(rows * groups) * 4) / 4;
  qr.ldg = groups;
  return qr;
}

void QuantizeRows(const float* x, int64_t ldx, const int32_t* src_rows, int32_t per_entry, int64_t rows, int64_t k,
                  int group, int bits, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(group == 32 || group == 64 || group == 128, "[cuda] QuantizeRows: group size");
  const int64_t warps = rows * (k / group);
  if (warps == 0) return;
  const int64_t blocks = (warps + 7) / 8;
  G4_CHECK_MSG(blocks < (int64_t{1} << 31), "[cuda] QuantizeRows: too many rows");
  QuantizeKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, ldx, src_rows, per_entry, rows, k, group,
                                                                     bits, qr);
  G4_CUDA_LAUNCHED();
}

void AffineInt8MatMul(const DevWeight& w, int bits, const QRows& qr, const TileSource& src, int mt, int64_t tiles,
                      float* y, int64_t ldy, cudaStream_t stream) {
  G4_CHECK_MSG(mt == 1 || mt == 2 || mt == 4 || mt == kMaxMt, "[cuda] AffineInt8MatMul: tile rows");
  G4_CHECK_MSG(tiles <= 65535, "[cuda] MatMul: too many input rows for one launch");
  if (tiles == 0 || w.rows == 0) return;
  switch (bits) {
    case 2: return LaunchForBits<2>(mt, w, qr, src, tiles, y, ldy, stream);
    case 3: return LaunchForBits<3>(mt, w, qr, src, tiles, y, ldy, stream);
    case 4: return LaunchForBits<4>(mt, w, qr, src, tiles, y, ldy, stream);
    case 5: return LaunchForBits<5>(mt, w, qr, src, tiles, y, ldy, stream);
    case 6: return LaunchForBits<6>(mt, w, qr, src, tiles, y, ldy, stream);
    default: return LaunchForBits<8>(mt, w, qr, src, tiles, y, ldy, stream);
  }
}

}  // namespace g4::cuda
