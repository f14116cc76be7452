// AffineInt8RowMatMul (affine_int8.cuh): one quantized input row against
// affine weights, one warp per weight row at a time, no block barriers.
//
// Lane l takes groups l, l + 32, ... of the row (a round is 32 groups), so
// a load instruction of the warp reads the row's contiguous bytes; its
// group's integer sum (dp4a of the unpacked codes with the quantized input)
// never leaves the lane. The lanes then hand their groups' four terms to
// lane 0 through shared memory, which continues the output's float
// sequence over the round's groups in order:
//   y = fma(float(isum), s * d, y);  y = fma(b, xs, y),
// the tiled kernel's phase 2, so the bits are the same.
//
// The grid is at most what stays resident; warp w takes rows w, w + W, ...
// of all the products' rows (W warps in all) and walks its (row, round)
// items with the codes of the next D items requested before an item's sums
// and chain, across row boundaries, so HBM always has D items per warp to
// serve. Launched as a programmatic dependent (sm_90): the first items'
// codes, scales and biases are requested before the wait for the kernel
// that quantized the input.
#include <algorithm>

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

// Row n of all the products' rows (set.first_block[i]: product i's first
// row here): its product and row within it.
__device__ __forceinline__ AffineOut ProductRow(const OutSet& set, int64_t n, int64_t& row) {
  int which;
  const AffineOut o = set.Of(static_cast<unsigned>(n), which);
  row = n - set.first_block[which];
  return o;
}

template <int B, int P>
__global__ __launch_bounds__(kRowWarps * 32, kRowBlocksPerSm) void AffineInt8RowKernel(OutSet set, QRows qr) {
  constexpr int D = RoundsInFlight<B, P>();
  __shared__ float4 terms[kRowWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t all_rows = set.first_block[set.n];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowWarps + warp;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kRowWarps;
  const int64_t groups = set.out[0].w.groups_per_row, rounds = (groups + 31) / 32;
  const int64_t my_rows = first < all_rows ? (all_rows - 1 - first) / stride + 1 : 0;
  const int64_t items = my_rows * rounds;

  uint32_t wd[D][P][B];
  float sc[D], bi[D];
  // Item i: round i % rounds of the warp's row i / rounds.
  const auto load = [&](int slot, int64_t i) {  // slot: a compile-time index after unrolling
    if (i >= items) return;
    const int64_t r = i % rounds, g = r * 32 + lane;
    if (g >= groups) return;
    int64_t row;
    const AffineOut o = ProductRow(set, first + (i / rounds) * stride, row);
#pragma unroll
    for (int j = 0; j < P; ++j) LoadChunkWords<B>(o.w, row, g * P + j, wd[slot][j]);
    sc[slot] = LoadScale(o.w.scale_type, o.w.scales, row * groups + g);
    bi[slot] = LoadScale(o.w.scale_type, o.w.biases, row * groups + g);
  };
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, d);
  WaitForPredecessor();

  float acc = 0.0f;
  for (int64_t i0 = 0; i0 < items; i0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int64_t i = i0 + d;
      if (i >= items) break;
      const int64_t r = i % rounds, g = r * 32 + lane;
      if (g < groups) {
        int isum = 0;
#pragma unroll
        for (int j = 0; j < P; ++j) {
          uint32_t quad[8];
          Unpack<B>(wd[d][j], quad);
          const uint4* qp = reinterpret_cast<const uint4*>(qr.q + (g * P + j) * 32);
          const uint4 a = __ldg(qp), b = __ldg(qp + 1);
          isum = Dp4a(quad[0], a.x, isum), isum = Dp4a(quad[1], a.y, isum), isum = Dp4a(quad[2], a.z, isum);
          isum = Dp4a(quad[3], a.w, isum), isum = Dp4a(quad[4], b.x, isum), isum = Dp4a(quad[5], b.y, isum);
          isum = Dp4a(quad[6], b.z, isum), isum = Dp4a(quad[7], b.w, isum);
        }
        terms[warp][lane] = make_float4(__int2float_rn(isum), __fmul_rn(sc[d], qr.d[g]), bi[d], qr.xs[g]);
      }
      load(d, i + D);  // the slot's next item flies during the chain
      __syncwarp();
      if (lane == 0) {
        const int nch = static_cast<int>(min(static_cast<int64_t>(32), groups - r * 32));
#pragma unroll 8
        for (int gl = 0; gl < nch; ++gl) {
          const float4 t = terms[warp][gl];
          acc = __fmaf_rn(t.x, t.y, acc);
          acc = __fmaf_rn(t.z, t.w, acc);
        }
        if (r == rounds - 1) {  // the row is done
          int64_t row;
          const AffineOut o = ProductRow(set, first + (i / rounds) * stride, row);
          o.y[row] = acc;
          acc = 0.0f;
        }
      }
      __syncwarp();
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

template <int B, int P>
void Launch(const OutSet& set, const QRows& qr, cudaStream_t stream) {
  const int64_t blocks = (set.first_block[set.n] + kRowWarps - 1) / kRowWarps;
  LaunchDependent(AffineInt8RowKernel<B, P>, dim3(static_cast<unsigned>(std::min<int64_t>(blocks, ResidentBlocks()))),
                  dim3(kRowWarps * 32), stream, set, qr);
}

template <int B>
void LaunchForBits(int group, const OutSet& set, const QRows& qr, cudaStream_t stream) {
  switch (group) {
    case 32: return Launch<B, 1>(set, qr, stream);
    case 64: return Launch<B, 2>(set, qr, stream);
    default: return Launch<B, 4>(set, qr, stream);
  }
}

}  // namespace

void AffineInt8RowMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream) {
  // Units of one weight row: first_block is each product's first row among all the products' rows.
  const OutSet set = MakeOutSet(outs, 1, "[cuda] AffineInt8RowMatMul");
  const DevWeight& w0 = outs[0].w;
  if (set.first_block[set.n] == 0 || w0.groups_per_row == 0) return;
  switch (bits) {
    case 2: return LaunchForBits<2>(w0.group, set, qr, stream);
    case 3: return LaunchForBits<3>(w0.group, set, qr, stream);
    case 4: return LaunchForBits<4>(w0.group, set, qr, stream);
    case 5: return LaunchForBits<5>(w0.group, set, qr, stream);
    case 6: return LaunchForBits<6>(w0.group, set, qr, stream);
    default: return LaunchForBits<8>(w0.group, set, qr, stream);
  }
}

}  // namespace g4::cuda
