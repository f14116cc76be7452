// MatMul for few input rows (decode) and affine weights: the canonical
// order of matmul_core.cuh, laid out for memory bandwidth.
//
// Each block stages its input rows in shared memory, permuted (round i,
// piece t, class c: lane c's 32 floats of a unit are 8 float4 a warp reads
// without bank conflicts): one row whole, after the block's first weight
// loads are issued; 2-8 rows in chunks of rounds (one barrier pair per
// chunk). Each warp computes NR weight rows for the block's MT input rows,
// lane c taking class c (units c, c + 32, ...), the next unit's codes and
// scales loaded while the current one is multiplied, each weight element
// decoded once for the MT rows; the warp butterfly finishes. For one input
// row NR and the block size grow with the number of weight rows, so small
// matrices still spread over the SMs and large ones keep more bytes in
// flight per lane. The bits are those of the other MatMul kernels: a weight
// element is fma(q, scale, bias), acc = fma(x, w, acc) column by column,
// the same butterfly.
//
// 4-bit codes skip the shift per element: nibble j of a word, masked in
// place (q * 16^j < 2^20) and or-ed into the mantissa of 2^23, is q * 16^j
// exactly; with the scale pre-multiplied by 16^-j (exact while the scale is
// not tiny: |s| >= 2^-100 or 0, checked per unit, else the plain path)
// fma(q 16^j, s 16^-j, b) rounds q s + b once, as fma(q, s, b) does.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matmul.cuh"
#include "backend/cuda/matmul_core.cuh"

namespace g4::cuda {
namespace {

constexpr int kMaxSmem = 200 * 1024;  // one staged row: K up to 51200
constexpr int kFewSmem = 96 * 1024;   // several rows: staged in chunks of rounds

__device__ __forceinline__ float Magic(uint32_t bits) { return __uint_as_float(0x4B000000u | bits) - 8388608.0f; }

// acc[r] += unit (codes cw[r], scale s[r], bias b[r]) . xv, columns in order.
template <int B, int NR>
__device__ __forceinline__ void UnitAffine(const uint32_t (&cw)[NR][B], const float (&s)[NR], const float (&b)[NR],
                                           const float (&xv)[kUnit], float (&acc)[NR]) {
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    bool fast = false;
    if constexpr (B == 4) fast = !(fabsf(s[r]) < 0x1p-100f) || s[r] == 0.0f;
    if (fast) {
      const float s0 = s[r], s1 = s[r] * 0x1p-4f, s2 = s[r] * 0x1p-8f, s3 = s[r] * 0x1p-12f, s4 = s[r] * 0x1p-16f;
      const float br = b[r];
      float a = acc[r];
#pragma unroll
      for (int q = 0; q < B; ++q) {
        const uint32_t w = cw[r][q], h = w >> 12;
        a = __fmaf_rn(xv[8 * q + 0], __fmaf_rn(Magic(w & 0xFu), s0, br), a);
        a = __fmaf_rn(xv[8 * q + 1], __fmaf_rn(Magic(w & 0xF0u), s1, br), a);
        a = __fmaf_rn(xv[8 * q + 2], __fmaf_rn(Magic(w & 0xF00u), s2, br), a);
        a = __fmaf_rn(xv[8 * q + 3], __fmaf_rn(Magic(w & 0xF000u), s3, br), a);
        a = __fmaf_rn(xv[8 * q + 4], __fmaf_rn(Magic(w & 0xF0000u), s4, br), a);
        a = __fmaf_rn(xv[8 * q + 5], __fmaf_rn(Magic(h & 0xF00u), s2, br), a);
        a = __fmaf_rn(xv[8 * q + 6], __fmaf_rn(Magic(h & 0xF000u), s3, br), a);
        a = __fmaf_rn(xv[8 * q + 7], __fmaf_rn(Magic(h & 0xF0000u), s4, br), a);
      }
      acc[r] = a;
    } else {
#pragma unroll
      for (int c = 0; c < kUnit; ++c) acc[r] = __fmaf_rn(xv[c], __fmaf_rn(ChunkCode<B>(cw[r], c), s[r], b[r]), acc[r]);
    }
  }
}

template <int B, int NR>
__device__ __forceinline__ void LoadUnit(const DevWeight& w, const int64_t (&rows)[NR], int64_t u, int ushift,
                                         uint32_t (&words)[NR][B], float (&s)[NR], float (&b)[NR]) {
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    LoadChunkWords<B>(w, rows[r], u, words[r]);
    const int64_t g = rows[r] * w.groups_per_row + (u >> ushift);
    s[r] = LoadScale(w.scale_type, w.scales, g);
    b[r] = LoadScale(w.scale_type, w.biases, g);
  }
}

// One input row, NR weight rows per warp, persistent: the block stages x
// once, then takes row groups blockIdx.x, + gridDim.x, ...; a lane's loads
// run one unit ahead across row groups too (the next group's first unit is
// in flight while the current group's last one is multiplied).
template <int FMT, int NR>
__global__ __launch_bounds__(256, 2) void GemvRowKernel(DevWeight w, const float* __restrict__ x, bool xvec,
                                                     float* __restrict__ y, int ushift) {
  extern __shared__ float4 xs[];  // [round][piece t][class c]
  constexpr int B = AffineBits(FMT);
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5, warp = threadIdx.x >> 5;
  const int64_t K = w.cols, units = Units(K), rounds = (units + kClasses - 1) / kClasses;
  const int64_t groups = (w.rows + int64_t{warps} * NR - 1) / (int64_t{warps} * NR);
  auto first_row = [&](int64_t g) { return (g * warps + warp) * NR; };
  int64_t g = blockIdx.x;
  int64_t n0 = first_row(g);
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, w.rows - 1);
  uint32_t cw[NR][B];
  float cs[NR], cb[NR];
  if (n0 < w.rows && lane < units) LoadUnit<B, NR>(w, rows, lane, ushift, cw, cs, cb);
  for (int64_t f = threadIdx.x; f < rounds * 256; f += blockDim.x) {
    const int64_t i = f >> 8, k = i * kRound + 4 * (f & 255);
    const int q = static_cast<int>(f & 255);
    float4 v;
    if (xvec && k + 3 < K) {
      v = *reinterpret_cast<const float4*>(x + k);
    } else {
      v.x = k < K ? x[k] : 0.0f;
      v.y = k + 1 < K ? x[k + 1] : 0.0f;
      v.z = k + 2 < K ? x[k + 2] : 0.0f;
      v.w = k + 3 < K ? x[k + 3] : 0.0f;
    }
    xs[i * 256 + (q & 7) * kClasses + (q >> 3)] = v;
  }
  __syncthreads();
  while (g < groups && n0 < w.rows) {  // warp-uniform
    const int64_t g_next = g + gridDim.x, n_next = first_row(g_next);
    const bool next_group = g_next < groups && n_next < w.rows;
    int64_t next_rows[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) next_rows[r] = min(n_next + r, w.rows - 1);
    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[r] = 0.0f;
    for (int64_t u = lane; u < units; u += kClasses) {
      uint32_t nw[NR][B];
      float ns[NR], nb[NR];
      const bool more = u + kClasses < units;
      const bool ahead = more || (next_group && lane < units);
      if (more) {
        LoadUnit<B, NR>(w, rows, u + kClasses, ushift, nw, ns, nb);
      } else if (ahead) {
        LoadUnit<B, NR>(w, next_rows, lane, ushift, nw, ns, nb);
      }
      const float4* xq = xs + (u >> 5) * 256 + lane;
      float xv[kUnit];
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float4 f = xq[t * kClasses];
        xv[4 * t] = f.x, xv[4 * t + 1] = f.y, xv[4 * t + 2] = f.z, xv[4 * t + 3] = f.w;
      }
      UnitAffine<B, NR>(cw, cs, cb, xv, acc);
      if (ahead) {
#pragma unroll
        for (int r = 0; r < NR; ++r) {
#pragma unroll
          for (int q = 0; q < B; ++q) cw[r][q] = nw[r][q];
          cs[r] = ns[r];
          cb[r] = nb[r];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      const float v = WarpSum(acc[r]);
      if (lane == r && n0 + r < w.rows) y[n0 + r] = v;
    }
    g = g_next;
    n0 = n_next;
#pragma unroll
    for (int r = 0; r < NR; ++r) rows[r] = next_rows[r];
  }
}

template <int FMT, int NR>
void LaunchRow(const DevWeight& w, const float* x, float* y, int warps, int64_t rounds, int ushift,
               cudaStream_t stream) {
  static int sms = 0;  // one thread drives the backend
  if (sms == 0) {
    G4_CUDA_CHECK(
        cudaFuncSetAttribute(GemvRowKernel<FMT, NR>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    int dev = 0;
    G4_CUDA_CHECK(cudaGetDevice(&dev));
    G4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  const size_t smem = static_cast<size_t>(rounds) * 256 * sizeof(float4);
  int per_sm = 0;  // resident blocks per SM at this stage size
  G4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, GemvRowKernel<FMT, NR>, warps * 32, smem));
  const int64_t per_block = int64_t{warps} * NR, groups = (w.rows + per_block - 1) / per_block;
  const int64_t blocks = std::min(groups, std::max<int64_t>(int64_t{per_sm} * sms, 1));
  const bool xvec = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  GemvRowKernel<FMT, NR><<<static_cast<unsigned>(blocks), warps * 32, smem, stream>>>(w, x, xvec, y, ushift);
  G4_CUDA_LAUNCHED();
}

// MT input rows (M tile m_tile of the launch) x NR weight rows per warp.
// The input rows are staged `chunk` rounds at a time (all of K at once when
// it fits, always for MT = 1), one barrier pair per chunk.
template <int FMT, int MT, int NR>
__global__ __launch_bounds__(256) void GemvFewKernel(DevWeight w, const float* __restrict__ x, int64_t ldx, bool xvec,
                                                     int64_t M, int64_t m_tiles, float* __restrict__ y, int64_t ldy,
                                                     int ushift, int chunk) {
  extern __shared__ float4 xs[];  // [m][round in chunk][piece t][class c]
  constexpr int B = AffineBits(FMT);
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int64_t m_tile = blockIdx.x % m_tiles, row_block = blockIdx.x / m_tiles;
  const int64_t n0 = (row_block * warps + (threadIdx.x >> 5)) * NR, m0 = m_tile * MT;
  const bool active = n0 < w.rows;
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, w.rows - 1);
  const int64_t K = w.cols, units = Units(K), rounds = (units + kClasses - 1) / kClasses;
  uint32_t cw[NR][B];
  float cs[NR], cb[NR];
  if (active && lane < units) LoadUnit<B, NR>(w, rows, lane, ushift, cw, cs, cb);
  float acc[MT][NR];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[m][r] = 0.0f;
  int64_t u = lane;
  for (int64_t c0 = 0; c0 < rounds; c0 += chunk) {
    const int64_t c1 = min(rounds, c0 + chunk);
    if (c0 > 0) __syncthreads();  // the previous chunk is consumed
    for (int64_t f = threadIdx.x; f < MT * (c1 - c0) * 256; f += blockDim.x) {
      const int64_t mi = f / ((c1 - c0) * 256), rest = f - mi * (c1 - c0) * 256;
      const int64_t i = c0 + (rest >> 8), k = i * kRound + 4 * (rest & 255);
      const int q = static_cast<int>(rest & 255);
      const float* xr = x + min(m0 + mi, M - 1) * ldx;
      float4 v;
      if (xvec && k + 3 < K) {
        v = *reinterpret_cast<const float4*>(xr + k);
      } else {
        v.x = k < K ? xr[k] : 0.0f;
        v.y = k + 1 < K ? xr[k + 1] : 0.0f;
        v.z = k + 2 < K ? xr[k + 2] : 0.0f;
        v.w = k + 3 < K ? xr[k + 3] : 0.0f;
      }
      xs[(mi * chunk + (rest >> 8)) * 256 + (q & 7) * kClasses + (q >> 3)] = v;
    }
    __syncthreads();
    if (!active) continue;
    for (; u < units && (u >> 5) < c1; u += kClasses) {
      uint32_t nw[NR][B];
      float ns[NR], nb[NR];
      const bool more = u + kClasses < units;
      if (more) LoadUnit<B, NR>(w, rows, u + kClasses, ushift, nw, ns, nb);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const float4* xq = xs + (m * chunk + ((u >> 5) - c0)) * 256 + lane;
        float xv[kUnit];
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          const float4 f = xq[t * kClasses];
          xv[4 * t] = f.x, xv[4 * t + 1] = f.y, xv[4 * t + 2] = f.z, xv[4 * t + 3] = f.w;
        }
        UnitAffine<B, NR>(cw, cs, cb, xv, acc[m]);
      }
      if (more) {
#pragma unroll
        for (int r = 0; r < NR; ++r) {
#pragma unroll
          for (int q = 0; q < B; ++q) cw[r][q] = nw[r][q];
          cs[r] = ns[r];
          cb[r] = nb[r];
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      const float v = WarpSum(acc[m][r]);
      if (lane == m * NR + r && m0 + m < M && n0 + r < w.rows) y[(m0 + m) * ldy + n0 + r] = v;
    }
}

template <int FMT, int MT, int NR>
void Launch(const DevWeight& w, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy, int warps,
            int chunk, int ushift, cudaStream_t stream) {
  static bool configured = false;  // one thread drives the backend
  if (!configured) {
    G4_CUDA_CHECK(cudaFuncSetAttribute(GemvFewKernel<FMT, MT, NR>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kMaxSmem));
    configured = true;
  }
  const int64_t per_block = int64_t{warps} * NR, m_tiles = (M + MT - 1) / MT;
  const int64_t blocks = (w.rows + per_block - 1) / per_block * m_tiles;
  const bool xvec = reinterpret_cast<uintptr_t>(x) % 16 == 0 && (ldx % 4 == 0 || M == 1);
  const size_t smem = static_cast<size_t>(MT) * chunk * 256 * sizeof(float4);
  GemvFewKernel<FMT, MT, NR><<<static_cast<unsigned>(blocks), warps * 32, smem, stream>>>(
      w, x, ldx, xvec, M, m_tiles, y, ldy, ushift, chunk);
  G4_CUDA_LAUNCHED();
}

template <int FMT>
void LaunchFormat(const DevWeight& w, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy, int64_t rounds,
                  int ushift, cudaStream_t stream) {
  auto chunk = [&](int mt) { return static_cast<int>(std::min<int64_t>(rounds, kFewSmem / (mt * 4096))); };
  if (M == 1) {
    // One weight row per warp, 8 warps per block: on the H200 this beat 2
    // and 4 rows per warp (e4b q4 batch-1 decode 129.7 vs 125.1 vs 96.0
    // tok/s: more resident warps hide more latency than sharing the staged
    // x saves). G4_CUDA_GEMV1_NR=2|4 selects the others, to measure.
    static const int forced = [] {
      const char* e = std::getenv("G4_CUDA_GEMV1_NR");
      return e == nullptr ? 0 : std::atoi(e);
    }();
    const int nr = forced == 2 || forced == 4 ? forced : 1;
    const int warps = 8;
    if (nr == 4) return LaunchRow<FMT, 4>(w, x, y, warps, rounds, ushift, stream);
    if (nr == 2) return LaunchRow<FMT, 2>(w, x, y, warps, rounds, ushift, stream);
    return LaunchRow<FMT, 1>(w, x, y, warps, rounds, ushift, stream);
  }
  const int warps = w.rows >= 1056 ? 8 : 4;
  if (M == 2) return Launch<FMT, 2, 1>(w, x, ldx, M, y, ldy, warps, chunk(2), ushift, stream);
  if (M <= 4) return Launch<FMT, 4, 1>(w, x, ldx, M, y, ldy, warps, chunk(4), ushift, stream);
  return Launch<FMT, 8, 1>(w, x, ldx, M, y, ldy, warps, chunk(8), ushift, stream);
}

}  // namespace

bool GemvFewRows(const DevWeight& w, int fmt, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy,
                 cudaStream_t stream) {
  if (!IsAffine(fmt) || w.rows == 0 || M < 1 || M > kGemvMaxRows) return false;
  const int64_t rounds = (Units(w.cols) + kClasses - 1) / kClasses;
  if (rounds == 0 || (M == 1 && rounds * 4096 > kMaxSmem)) return false;
  const int ushift = w.group == 32 ? 0 : w.group == 64 ? 1 : 2;
  switch (fmt) {
    case kWA2: LaunchFormat<kWA2>(w, x, ldx, M, y, ldy, rounds, ushift, stream); break;
    case kWA3: LaunchFormat<kWA3>(w, x, ldx, M, y, ldy, rounds, ushift, stream); break;
    case kWA4: LaunchFormat<kWA4>(w, x, ldx, M, y, ldy, rounds, ushift, stream); break;
    case kWA5: LaunchFormat<kWA5>(w, x, ldx, M, y, ldy, rounds, ushift, stream); break;
    case kWA6: LaunchFormat<kWA6>(w, x, ldx, M, y, ldy, rounds, ushift, stream); break;
    default: LaunchFormat<kWA8>(w, x, ldx, M, y, ldy, rounds, ushift, stream); break;
  }
  return true;
}

}  // namespace g4::cuda
