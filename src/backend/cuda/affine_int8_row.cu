// AffineInt8RowMatMul (affine_int8.cuh): one quantized input row against
// affine weights, one warp per task of R consecutive weight rows at a time,
// no block barriers.
//
// A warp walks its task round by round (a round is 32 groups), and within a
// round row by row: chunk load instruction j of the round reads chunks
// 32j .. 32j + 31 (32 columns each), so a warp's load reads contiguous
// bytes; a lane's chunk sums (dp4a of the unpacked codes with the quantized
// input) are added into group sums by shuffles and handed to lane g = the
// group within the round, which writes the group's four terms for row r of
// the task to shared memory. After the round's last row, lane r continues
// row r's float sequence over the round's groups in order:
//   y = fma(float(isum), s * d, y);  y = fma(b, xs, y),
// the tiled kernel's phase 2, so the bits are the same. The sequence is the
// serial part of the kernel; R lanes share it instead of one.
//
// The grid is at most what stays resident; warp w takes tasks w, w + W, ...
// of all the products' tasks (W warps in all) and keeps the codes of the
// next D (row, round) items in flight across row, round and task
// boundaries, so HBM always has D items per warp to serve. Launched as a
// programmatic dependent (sm_90): the first items' codes, scales and biases
// are requested before the wait for the kernel that quantized the input.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cuda_check.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

constexpr int kRowWarps = 8;  // warps per block
constexpr int kRowBlocksPerSm = 4;

// Rounds a lane keeps in flight (P * B words of codes each): two while
// they fit in 16 words (more spill at 64 registers).
template <int B, int P>
constexpr int RoundsInFlight() {
  return P * B <= 8 ? 2 : 1;
}

// A warp's place in its walk: task (global unit of set), round, row within the task.
template <int R>
struct Cursor {
  int64_t task;
  int round = 0, row = 0;
  __device__ __forceinline__ void Next(int rounds, int64_t stride) {
    if (++row < R) return;
    row = 0;
    if (++round < rounds) return;
    round = 0;
    task += stride;
  }
};

template <int B, int P, int R>
__global__ __launch_bounds__(kRowWarps * 32, kRowBlocksPerSm) void AffineInt8RowKernel(OutSet set, QRows qr) {
  constexpr int D = RoundsInFlight<B, P>();
  constexpr int G = 32 / P;  // groups per chunk load instruction
  constexpr unsigned kAll = 0xffffffffu;
  __shared__ float4 terms[kRowWarps][R][33];  // [row][group], padded: lanes r read one group without conflicts
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t tasks = set.first_block[set.n];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kRowWarps;
  const int64_t groups = set.out[0].w.groups_per_row, chunks = groups * P;
  const int rounds = static_cast<int>((groups + 31) / 32);

  uint32_t wd[D][P][B];
  float sc[D], bi[D];
  const auto load = [&](int slot, const Cursor<R>& c) {  // slot: a compile-time index after unrolling
    if (c.task >= tasks) return;
    int which;
    const AffineOut o = set.Of(static_cast<unsigned>(c.task), which);
    const int64_t row = (c.task - set.first_block[which]) * R + c.row;
    if (row >= o.w.rows) return;
    const int64_t c0 = static_cast<int64_t>(c.round) * 32 * P + lane;
#pragma unroll
    for (int j = 0; j < P; ++j)
      if (c0 + 32 * j < chunks) LoadChunkWords<B>(o.w, row, c0 + 32 * j, wd[slot][j]);
    const int64_t g = static_cast<int64_t>(c.round) * 32 + lane;
    if (g < groups) {
      sc[slot] = LoadScale(o.w.scale_type, o.w.scales, row * groups + g);
      bi[slot] = LoadScale(o.w.scale_type, o.w.biases, row * groups + g);
    }
  };
  Cursor<R> ahead{static_cast<int64_t>(blockIdx.x) * kRowWarps + warp};
  Cursor<R> at = ahead;
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, ahead), ahead.Next(rounds, stride);
  WaitForPredecessor();

  float acc = 0.0f;  // lane r: row r of the task
  while (at.task < tasks) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (at.task >= tasks) break;
      const int64_t c0 = static_cast<int64_t>(at.round) * 32 * P + lane;
      int s[P];
#pragma unroll
      for (int j = 0; j < P; ++j) {
        s[j] = 0;
        if (c0 + 32 * j < chunks) {
          uint32_t quad[8];
          Unpack<B>(wd[d][j], quad);
          const uint4* qp = reinterpret_cast<const uint4*>(qr.q + (c0 + 32 * j) * 32);
          const uint4 a = __ldg(qp), b = __ldg(qp + 1);
          int v = Dp4a(quad[0], a.x, 0);
          v = Dp4a(quad[1], a.y, v), v = Dp4a(quad[2], a.z, v), v = Dp4a(quad[3], a.w, v);
          v = Dp4a(quad[4], b.x, v), v = Dp4a(quad[5], b.y, v), v = Dp4a(quad[6], b.z, v);
          s[j] = Dp4a(quad[7], b.w, v);
        }
      }
      // Chunk sums -> group sums (a group's P chunks lie in adjacent lanes of one
      // instruction), then group q of the round to lane q.
      int isum = 0;
#pragma unroll
      for (int j = 0; j < P; ++j) {
#pragma unroll
        for (int m = 1; m < P; m <<= 1) s[j] += __shfl_xor_sync(kAll, s[j], m);
        const int v = __shfl_sync(kAll, s[j], (lane % G) * P);
        if (lane / G == j) isum = v;
      }
      const int64_t g = static_cast<int64_t>(at.round) * 32 + lane;
      if (g < groups)
        terms[warp][at.row][lane] = make_float4(__int2float_rn(isum), __fmul_rn(sc[d], qr.d[g]), bi[d], qr.xs[g]);
      load(d, ahead);  // the slot's next item flies during the chain
      ahead.Next(rounds, stride);
      if (at.row == R - 1) {  // the round's last row: the rows' float sequences
        __syncwarp();
        if (lane < R) {
          const int nch = static_cast<int>(min(static_cast<int64_t>(32), groups - static_cast<int64_t>(at.round) * 32));
#pragma unroll 8
          for (int gl = 0; gl < nch; ++gl) {
            const float4 t = terms[warp][lane][gl];
            acc = __fmaf_rn(t.x, t.y, acc);
            acc = __fmaf_rn(t.z, t.w, acc);
          }
          if (at.round == rounds - 1) {  // the task's rows are done
            int which;
            const AffineOut o = set.Of(static_cast<unsigned>(at.task), which);
            const int64_t row = (at.task - set.first_block[which]) * R + lane;
            if (row < o.w.rows) o.y[row] = acc;
            acc = 0.0f;
          }
        }
        __syncwarp();
      }
      at.Next(rounds, stride);
    }
  }
}

int ResidentBlocks() {
  static const int sms = [] {
    int dev = 0, n = 0;
    G4_CUDA_CHECK(cudaGetDevice(&dev));
    G4_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms * kRowBlocksPerSm;
}

// Rows per task. One (lane 0 alone continues the float sequences) unless
// the launch has so many rows that four per task still leave every
// resident warp 8 tasks: measured on the H200 (docs/benchmarks.md,
// 2026-12-02 "one-row kernel"), more rows per task cut the serial part but
// leave fewer warps to keep loads in flight, which only the LM head's
// 262144 rows can afford. G4_CUDA_ROW_TASK=1|4 forces one (for tests and
// measurements).
int RowsPerTask(int64_t rows) {
  static const int forced = [] {
    const char* e = std::getenv("G4_CUDA_ROW_TASK");
    const int v = e ? std::atoi(e) : 0;
    return v == 1 || v == 4 ? v : 0;
  }();
  if (forced) return forced;
  const int64_t warps = static_cast<int64_t>(ResidentBlocks()) * kRowWarps;
  return rows >= 4 * 8 * warps ? 4 : 1;
}

template <int B, int P, int R>
void Launch(std::span<const AffineOut> outs, const QRows& qr, cudaStream_t stream) {
  const OutSet set = MakeOutSet(outs, R, "[cuda] AffineInt8RowMatMul");
  const int64_t blocks = (set.first_block[set.n] + kRowWarps - 1) / kRowWarps;
  if (blocks == 0) return;
  LaunchDependent(AffineInt8RowKernel<B, P, R>,
                  dim3(static_cast<unsigned>(std::min<int64_t>(blocks, ResidentBlocks()))), dim3(kRowWarps * 32),
                  stream, set, qr);
}

template <int B, int P>
void LaunchForTask(int64_t rows, std::span<const AffineOut> outs, const QRows& qr, cudaStream_t stream) {
  if (RowsPerTask(rows) == 4) return Launch<B, P, 4>(outs, qr, stream);
  return Launch<B, P, 1>(outs, qr, stream);
}

template <int B>
void LaunchForBits(int group, int64_t rows, std::span<const AffineOut> outs, const QRows& qr, cudaStream_t stream) {
  switch (group) {
    case 32: return LaunchForTask<B, 1>(rows, outs, qr, stream);
    case 64: return LaunchForTask<B, 2>(rows, outs, qr, stream);
    default: return LaunchForTask<B, 4>(rows, outs, qr, stream);
  }
}

}  // namespace

void AffineInt8RowMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(!outs.empty(), "[cuda] AffineInt8RowMatMul: no products");
  const DevWeight& w0 = outs[0].w;
  if (w0.groups_per_row == 0) return;
  int64_t rows = 0;
  for (const AffineOut& o : outs) rows += o.w.rows;
  switch (bits) {
    case 2: return LaunchForBits<2>(w0.group, rows, outs, qr, stream);
    case 3: return LaunchForBits<3>(w0.group, rows, outs, qr, stream);
    case 4: return LaunchForBits<4>(w0.group, rows, outs, qr, stream);
    case 5: return LaunchForBits<5>(w0.group, rows, outs, qr, stream);
    case 6: return LaunchForBits<6>(w0.group, rows, outs, qr, stream);
    default: return LaunchForBits<8>(w0.group, rows, outs, qr, stream);
  }
}

}  // namespace g4::cuda
