// RMSNorm as HF Gemma 4 computes it in float32:
//   y = (x * (mean(x^2) + eps)^-1/2) * weight,
// and AddNorm (ops.h), the residual update that ends a sub-block with the
// next norm, in one launch.
// Rows shorter than 1024: one warp per row: lane l sums the squares of
// columns l, l + 32, ... in order, the warp butterfly adds the 32 partials.
// Longer rows: one block of 256 threads per row: thread t sums columns t,
// t + 256, ... in order, each warp's butterfly, the 8 warp sums added in
// warp order; up to 24 columns per thread are held in registers. Either way
// the order depends only on the row length, and RmsNorm and AddNorm share
// it (RowSumSquares, RowTotal), so AddNorm's bits are those of the separate
// ops.
// AddNorm may also quantize the row the next MatMul reads (AddNormArgs::
// feeds) in the integer scheme of affine_int8.cuh, with QuantizeKernel's
// pieces, so the MatMul skips its own quantization launch.
#include <type_traits>

#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/row_norm.cuh"

namespace g4::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // narrow rows: one warp each
constexpr int64_t kWideRow = 1024;
constexpr int kWideThreads = 256;

// The row a thread works on and its index among the row's N threads.
template <int N>
__device__ __forceinline__ int64_t RowOf() {
  return N == 32 ? static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) : blockIdx.x;
}
template <int N>
__device__ __forceinline__ int ThreadOf() {
  return N == 32 ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x);
}

// Every thread reads its columns before the barrier of RowTotal (a block)
// or before its own writes (a warp: its lanes write only what they read),
// so y may alias x.
template <int N>
__global__ __launch_bounds__(N == 32 ? kRowsPerBlock * 32 : N) void RmsNormKernel(
    const float* __restrict__ x, int64_t ldx, int64_t rows, int64_t d, const float* __restrict__ weight, float eps,
    float* y, int64_t ldy) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  __shared__ float partial[N / 32];
  const int64_t r = RowOf<N>();
  if (r >= rows) return;  // whole warps (narrow) or whole blocks (wide) leave together
  const int t = ThreadOf<N>();
  const float* xr = x + r * ldx;
  const float inv = InvRms(RowTotal<N>(RowSumSquares<N>(xr, d, t), partial), d, eps);
  float* yr = y + r * ldy;
#pragma unroll 8
  for (int64_t c = t; c < d; c += N) {
    const float v = xr[c] * inv;
    yr[c] = weight ? v * weight[c] : v;
  }
}

// AddNorm: o's norm, x updated column by column (each thread the columns
// of its own chain, so the next norm's chain runs in the same loop), then
// next_out from the updated x.
template <int N>
__global__ __launch_bounds__(N == 32 ? kRowsPerBlock * 32 : N) void AddNormKernel(
    float* __restrict__ x, int64_t ldx, const float* __restrict__ o, int64_t ldo, int64_t rows, int64_t d,
    const float* __restrict__ post_weight, float scale, bool scaled, float* __restrict__ next, int64_t ldn,
    const float* __restrict__ next_weight, float eps) {
  __shared__ float partial_o[N / 32], partial_x[N / 32];
  const int64_t r = RowOf<N>();
  if (r >= rows) return;
  const int t = ThreadOf<N>();
  // The weights' lines into L1 before the wait (pdl.cuh: weights may be
  // read early), one line per thread, so the loops below find them there.
  for (int64_t c = static_cast<int64_t>(t) * 32; c < d; c += static_cast<int64_t>(N) * 32) {
    if (post_weight) asm volatile("prefetch.global.L1 [%0];" ::"l"(post_weight + c));
    if (next_weight) asm volatile("prefetch.global.L1 [%0];" ::"l"(next_weight + c));
  }
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const float* orow = o + r * ldo;
  float* xrow = x + r * ldx;
  const float inv_o = InvRms(RowTotal<N>(RowSumSquares<N>(orow, d, t), partial_o), d, eps);
  float ss = 0.0f;
#pragma unroll 4
  for (int64_t c = t; c < d; c += N) {
    float v = orow[c] * inv_o;
    v = post_weight ? v * post_weight[c] : v;
    float xn = xrow[c] + v;
    if (scaled) xn = xn * scale;
    xrow[c] = xn;
    ss = __fmaf_rn(xn, xn, ss);
  }
  if (next == nullptr) return;
  const float inv = InvRms(RowTotal<N>(ss, partial_x), d, eps);
  float* nrow = next + r * ldn;
#pragma unroll 8
  for (int64_t c = t; c < d; c += N) {
    const float v = xrow[c] * inv;
    nrow[c] = next_weight ? v * next_weight[c] : v;
  }
}

// Wide rows held in registers: thread t of 256 keeps columns t, t + 256,
// ... (at most C of them) from one load to the last write, so a row costs
// one round trip to memory for x and o (the weights are requested before
// the wait) instead of one per pass. The chains, the totals and every float
// operation are the loop kernels' above, in their order, so the bits are
// theirs.
__device__ __forceinline__ bool Has(int t, int i, int64_t d) {
  return static_cast<int64_t>(t) + static_cast<int64_t>(i) * kWideThreads < d;
}

// Thread t's chain of squares over its columns, in column order.
template <int C>
__device__ __forceinline__ float ChainSquares(const float (&v)[C], int t, int64_t d) {
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < C; ++i)
    if (Has(t, i, d)) ss = __fmaf_rn(v[i], v[i], ss);
  return ss;
}

// out[c] = v * inv (times the weight, when there is one) for thread t's
// columns; v becomes those values.
template <int C>
__device__ __forceinline__ void StoreNormed(float (&v)[C], float inv, const float* weight, const float (&w)[C],
                                            float* out, int t, int64_t d) {
#pragma unroll
  for (int i = 0; i < C; ++i) {
    if (!Has(t, i, d)) continue;
    const float u = v[i] * inv;
    v[i] = weight ? u * w[i] : u;
    out[t + i * kWideThreads] = v[i];
  }
}

// Where a wide AddNorm quantizes the row it hands to the next MatMul:
// row r of qr, groups of `group` (0: it does not), codes for `bits`.
struct QuantOut {
  QRows qr;
  int group = 0, bits = 0;
};

// The row (thread t's columns t + 256 i in v) quantized into q's row r.
// With d a multiple of the group (32, 64 or 128), warp w's lanes hold
// columns 256 i + 32 w + lane: a whole group of 32, or the part of a group
// that the group / 32 neighbouring warps share, combined through `red`
// (2 * 8 * C words). All C groups of a thread go at once. A group's
// maximum and code sum are exact in any order, so the bits are
// QuantizeKernel's.
template <int C>
__device__ __forceinline__ void QuantizeInRegs(const float (&v)[C], int t, int64_t d, int64_t r, const QuantOut& q,
                                               uint32_t* red) {
  constexpr int W = kWideThreads / 32;
  const int lane = t & 31, warp = t >> 5, wpg = q.group / 32, w0 = warp & ~(wpg - 1);
  uint32_t amax[C];
#pragma unroll
  for (int i = 0; i < C; ++i) amax[i] = __reduce_max_sync(0xffffffffu, Has(t, i, d) ? AbsBits(v[i]) : 0u);
  if (wpg > 1) {
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < C; ++i) red[i * W + warp] = amax[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < C; ++i) {
      uint32_t m = red[i * W + w0];
      for (int k = 1; k < wpg; ++k) m = max(m, red[i * W + w0 + k]);
      amax[i] = m;
    }
  }
  int8_t* qrow = q.qr.q + r * q.qr.ldq;
  float dv[C];
  int sum[C];
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const GroupScale s = GroupScaleOf(amax[i]);
    dv[i] = s.d;
    const int qi = QuantizeValue(v[i], s.inv);
    if (Has(t, i, d)) qrow[QPos(q.bits, t + i * kWideThreads)] = static_cast<int8_t>(qi);
    sum[i] = __reduce_add_sync(0xffffffffu, Has(t, i, d) ? qi : 0);
  }
  if (wpg > 1) {
    int* isum = reinterpret_cast<int*>(red + C * W);
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < C; ++i) isum[i * W + warp] = sum[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < C; ++i) {
      int total = isum[i * W + w0];
      for (int k = 1; k < wpg; ++k) total += isum[i * W + w0 + k];
      sum[i] = total;
    }
  }
  if (lane != 0 || warp != w0) return;  // the group's first lane writes its d and xs
#pragma unroll
  for (int i = 0; i < C; ++i) {
    if (!Has(t, i, d)) continue;
    const int64_t g = (t + static_cast<int64_t>(i) * kWideThreads) / q.group;
    q.qr.d[r * q.qr.ldg + g] = dv[i];
    q.qr.xs[r * q.qr.ldg + g] = GroupXs(sum[i], dv[i]);
  }
}

template <int C>
__global__ __launch_bounds__(kWideThreads) void RmsNormWideKernel(const float* __restrict__ x, int64_t ldx,
                                                                  int64_t d, const float* __restrict__ weight,
                                                                  float eps, float* y, int64_t ldy) {
  __shared__ float partial[kWideThreads / 32];
  const int t = threadIdx.x;
  const int64_t r = blockIdx.x;
  float w[C], v[C];
#pragma unroll
  for (int i = 0; i < C; ++i) w[i] = weight && Has(t, i, d) ? __ldg(weight + t + i * kWideThreads) : 0.0f;
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const float* xr = x + r * ldx;
#pragma unroll
  for (int i = 0; i < C; ++i) v[i] = Has(t, i, d) ? xr[t + i * kWideThreads] : 0.0f;
  // Every read before RowTotal's barrier: y may alias x.
  const float inv = InvRms(RowTotal<kWideThreads>(ChainSquares<C>(v, t, d), partial), d, eps);
  StoreNormed<C>(v, inv, weight, w, y + r * ldy, t, d);
}

template <int C>
__global__ __launch_bounds__(kWideThreads) void AddNormWideKernel(
    float* __restrict__ x, int64_t ldx, const float* __restrict__ o, int64_t ldo, int64_t d,
    const float* __restrict__ post_weight, float scale, bool scaled, float* __restrict__ next, int64_t ldn,
    const float* __restrict__ next_weight, float eps, QuantOut quant) {
  __shared__ float partial_o[kWideThreads / 32], partial_x[kWideThreads / 32];
  __shared__ uint32_t quant_red[2 * (kWideThreads / 32) * C];
  const int t = threadIdx.x;
  const int64_t r = blockIdx.x;
  float pw[C], nw[C], ov[C], xv[C];
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const bool has = Has(t, i, d);
    pw[i] = post_weight && has ? __ldg(post_weight + t + i * kWideThreads) : 0.0f;
    nw[i] = next_weight && has ? __ldg(next_weight + t + i * kWideThreads) : 0.0f;
  }
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const float* orow = o + r * ldo;
  float* xrow = x + r * ldx;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const bool has = Has(t, i, d);
    ov[i] = has ? orow[t + i * kWideThreads] : 0.0f;
    xv[i] = has ? xrow[t + i * kWideThreads] : 0.0f;
  }
  const float inv_o = InvRms(RowTotal<kWideThreads>(ChainSquares<C>(ov, t, d), partial_o), d, eps);
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    if (!Has(t, i, d)) continue;
    float v = ov[i] * inv_o;
    v = post_weight ? v * pw[i] : v;
    float xn = xv[i] + v;
    if (scaled) xn = xn * scale;
    xv[i] = xn;
    xrow[t + i * kWideThreads] = xn;
    ss = __fmaf_rn(xn, xn, ss);
  }
  if (next != nullptr) {
    const float inv = InvRms(RowTotal<kWideThreads>(ss, partial_x), d, eps);
    StoreNormed<C>(xv, inv, next_weight, nw, next + r * ldn, t, d);
  }
  if (quant.group > 0) QuantizeInRegs<C>(xv, t, d, r, quant, quant_red);  // next's values, or x's
}

// Calls launch(std::integral_constant<int, C>) with the register kernels'
// columns per thread C (8, 12, 16 or 24) for a wide row of d columns;
// false, calling nothing, when a row needs more (the loop kernel's).
template <typename Launch>
bool WithWideRegs(int64_t d, Launch launch) {
  const int64_t per = (d + kWideThreads - 1) / kWideThreads;
  if (per <= 8) return launch(std::integral_constant<int, 8>{}), true;
  if (per <= 12) return launch(std::integral_constant<int, 12>{}), true;
  if (per <= 16) return launch(std::integral_constant<int, 16>{}), true;
  if (per <= 24) return launch(std::integral_constant<int, 24>{}), true;
  return false;
}

int64_t Ld(const TensorView& v) { return v.rows > 1 ? v.stride : v.cols; }

}  // namespace

void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y, cudaStream_t stream) {
  const auto wide = [&](auto c) {
    LaunchDependent(RmsNormWideKernel<decltype(c)::value>, dim3(static_cast<unsigned>(x.rows)), dim3(kWideThreads),
                    0, stream, x.f32(), Ld(x), x.cols, weight, eps, y.f32(), Ld(y));
  };
  if (x.cols < kWideRow) {
    const int64_t blocks = (x.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    LaunchDependent(RmsNormKernel<32>, dim3(static_cast<unsigned>(blocks)), dim3(kRowsPerBlock * 32), 0,
                    stream, x.f32(), Ld(x), x.rows, x.cols, weight, eps, y.f32(), Ld(y));
  } else if (!WithWideRegs(x.cols, wide)) {
    LaunchDependent(RmsNormKernel<kWideThreads>, dim3(static_cast<unsigned>(x.rows)), dim3(kWideThreads), 0,
                    stream, x.f32(), Ld(x), x.rows, x.cols, weight, eps, y.f32(), Ld(y));
  }
  G4_CUDA_LAUNCHED();
}

bool AddNorm(const AddNormArgs& a, const AddNormQuantize& quantize, Scratch& scratch, cudaStream_t stream) {
  const int64_t rows = a.x.rows, d = a.x.cols;
  float* next = a.next_out.data ? a.next_out.f32() : nullptr;
  const int64_t ldn = a.next_out.data ? Ld(a.next_out) : 0;
  const bool scaled = a.scale != 1.0f;
  QuantOut quant;
  const bool quantizes = quantize.group > 0 && d >= kWideRow && (d + kWideThreads - 1) / kWideThreads <= 24;
  if (quantizes) {
    G4_CHECK_MSG((quantize.group == 32 || quantize.group == 64 || quantize.group == 128) && d % quantize.group == 0,
                 "[cuda] AddNorm: quantization groups");
    // MatMul's own view of the same scratch (matmul.cu: QRowsIn of kQuant for rows x d).
    quant.qr = QRowsIn(scratch.Get(Scratch::kQuant, QRowsBytes(rows, d, quantize.group)), rows, d, quantize.group);
    quant.group = quantize.group;
    quant.bits = quantize.bits;
  }
  const auto wide = [&](auto c) {
    LaunchDependent(AddNormWideKernel<decltype(c)::value>, dim3(static_cast<unsigned>(rows)), dim3(kWideThreads),
                    0, stream, a.x.f32(), Ld(a.x), a.o.f32(), Ld(a.o), d, a.post_weight, a.scale, scaled, next,
                    ldn, a.next_weight, a.eps, quant);
  };
  if (d < kWideRow) {
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    LaunchDependent(AddNormKernel<32>, dim3(static_cast<unsigned>(blocks)), dim3(kRowsPerBlock * 32), 0,
                    stream, a.x.f32(), Ld(a.x), a.o.f32(), Ld(a.o), rows, d, a.post_weight, a.scale, scaled,
                    next, ldn, a.next_weight, a.eps);
  } else if (!WithWideRegs(d, wide)) {
    LaunchDependent(AddNormKernel<kWideThreads>, dim3(static_cast<unsigned>(rows)), dim3(kWideThreads), 0,
                    stream, a.x.f32(), Ld(a.x), a.o.f32(), Ld(a.o), rows, d, a.post_weight, a.scale, scaled,
                    next, ldn, a.next_weight, a.eps);
  }
  G4_CUDA_LAUNCHED();
  return quantizes;
}

}  // namespace g4::cuda
