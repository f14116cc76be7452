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
// AddNorm may also quantize the row it produces for the product that
// follows (ops.h next_product) into the MatMul's input scratch, once the
// row is complete: its warps take the weight groups in turn and call
// QuantizeGroup, QuantizeRows' code, so the MatMul finds QuantizeRows' bits
// and launches no quantization of its own.
#include <type_traits>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/prefetch.cuh"
#include "backend/cuda/quantize_group.cuh"
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

// Where AddNorm quantizes a row for the next product: QRows of the
// product's (bits, group); none when qr.q is null.
struct RowQuant {
  QRows qr;
  int group = 0;
  int bits = 0;
  bool of_x = false;  // x, not next_out
};

// Row r's d columns at `row` (global or shared memory, complete and visible
// to the caller's warps) quantized into rq: warp w of `warps` takes groups
// w, w + warps, ...
__device__ __forceinline__ void QuantizeRowGroups(const float* row, int64_t d, const RowQuant& rq, int64_t r,
                                                  int warp, int warps, int lane) {
  const int64_t groups = d / rq.group;
  int8_t* q = rq.qr.q + r * rq.qr.ldq;
  float* dg = rq.qr.d + r * rq.qr.ldg;
  float* xs = rq.qr.xs + r * rq.qr.ldg;
  for (int64_t g = warp; g < groups; g += warps)
    QuantizeGroup(row + g * rq.group, nullptr, rq.group, rq.bits, g, lane, q, dg + g, xs + g);
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
// next_out from the updated x, then rq's row quantized from memory.
template <int N>
__global__ __launch_bounds__(N == 32 ? kRowsPerBlock * 32 : N) void AddNormKernel(
    float* __restrict__ x, int64_t ldx, const float* __restrict__ o, int64_t ldo, int64_t rows, int64_t d,
    const float* __restrict__ post_weight, float scale, bool scaled, float* __restrict__ next, int64_t ldn,
    const float* __restrict__ next_weight, float eps, RowQuant rq) {
  __shared__ float partial_o[N / 32], partial_x[N / 32];
  const int64_t r = RowOf<N>();
  if (r >= rows) return;
  const int t = ThreadOf<N>();
  // The weights' lines into L1 before the wait (pdl.cuh: weights may be
  // read early), one line per thread, so the loops below find them there.
  for (int64_t c = static_cast<int64_t>(t) * 32; c < d; c += static_cast<int64_t>(N) * 32) {
    if (post_weight) PrefetchL1(post_weight + c);
    if (next_weight) PrefetchL1(next_weight + c);
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
  float* nrow = next ? next + r * ldn : nullptr;
  if (next != nullptr) {
    const float inv = InvRms(RowTotal<N>(ss, partial_x), d, eps);
#pragma unroll 8
    for (int64_t c = t; c < d; c += N) {
      const float v = xrow[c] * inv;
      nrow[c] = next_weight ? v * next_weight[c] : v;
    }
  }
  if (rq.qr.q == nullptr) return;
  // A narrow row's lane l reads only the columns it wrote (l mod 32); a
  // block's warps read columns other threads wrote: the barrier orders
  // those writes before the reads.
  if constexpr (N != 32) __syncthreads();
  QuantizeRowGroups(rq.of_x ? xrow : nrow, d, rq, r, N == 32 ? 0 : t >> 5, N / 32, t & 31);
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
// columns, and to also[c] when also is not null.
template <int C>
__device__ __forceinline__ void StoreNormed(const float (&v)[C], float inv, const float* weight, const float (&w)[C],
                                            float* out, int t, int64_t d, float* also = nullptr) {
#pragma unroll
  for (int i = 0; i < C; ++i) {
    if (!Has(t, i, d)) continue;
    const float u = v[i] * inv;
    const float y = weight ? u * w[i] : u;
    out[t + i * kWideThreads] = y;
    if (also) also[t + i * kWideThreads] = y;
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

// With Q, the row rq quantizes goes through shared memory (row), not back
// through global memory.
template <int C, bool Q>
__global__ __launch_bounds__(kWideThreads) void AddNormWideKernel(
    float* __restrict__ x, int64_t ldx, const float* __restrict__ o, int64_t ldo, int64_t d,
    const float* __restrict__ post_weight, float scale, bool scaled, float* __restrict__ next, int64_t ldn,
    const float* __restrict__ next_weight, float eps, RowQuant rq) {
  __shared__ float partial_o[kWideThreads / 32], partial_x[kWideThreads / 32];
  __shared__ float row[Q ? C * kWideThreads : 1];
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
    if (Q && rq.of_x) row[t + i * kWideThreads] = xn;
    ss = __fmaf_rn(xn, xn, ss);
  }
  if (next != nullptr) {
    const float inv = InvRms(RowTotal<kWideThreads>(ss, partial_x), d, eps);
    StoreNormed<C>(xv, inv, next_weight, nw, next + r * ldn, t, d, Q && !rq.of_x ? row : nullptr);
  }
  if constexpr (Q) {
    __syncthreads();  // the whole row in shared memory
    QuantizeRowGroups(row, d, rq, r, t >> 5, kWideThreads / 32, t & 31);
  }
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

}  // namespace

void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y, cudaStream_t stream) {
  const auto wide = [&](auto c) {
    LaunchDependent(RmsNormWideKernel<decltype(c)::value>, dim3(static_cast<unsigned>(x.rows)),
                    dim3(kWideThreads), 0, stream, x.f32(), x.pitch(), x.cols, weight, eps, y.f32(),
                    y.pitch());
  };
  if (x.cols < kWideRow) {
    const int64_t blocks = (x.rows + kRowsPerBlock - 1) / kRowsPerBlock;
    LaunchDependent(RmsNormKernel<32>, dim3(static_cast<unsigned>(blocks)), dim3(kRowsPerBlock * 32), 0,
                    stream, x.f32(), x.pitch(), x.rows, x.cols, weight, eps, y.f32(), y.pitch());
  } else if (!WithWideRegs(x.cols, wide)) {
    LaunchDependent(RmsNormKernel<kWideThreads>, dim3(static_cast<unsigned>(x.rows)), dim3(kWideThreads), 0,
                    stream, x.f32(), x.pitch(), x.rows, x.cols, weight, eps, y.f32(), y.pitch());
  }
  G4_CUDA_LAUNCHED();
}

bool AddNorm(const AddNormArgs& a, Scratch& scratch, cudaStream_t stream) {
  const int64_t rows = a.x.rows, d = a.x.cols;
  float* next = a.next_out.data ? a.next_out.f32() : nullptr;
  const int64_t ldn = a.next_out.data ? a.next_out.pitch() : 0;
  const bool scaled = a.scale != 1.0f;
  // The next product's input, quantized as MatMul would (matmul.cu): for
  // affine weights (of a format CudaOps checked) whose rows are this row's
  // length.
  RowQuant rq;
  const WeightMatrix* w = a.next_product;
  const bool quantize = w && w->is_affine() && w->cols == d && d % w->group_size == 0 && (a.product_of_x || next);
  if (quantize) {
    rq.qr = QRowsIn(scratch.Get(Scratch::kQuant, QRowsBytes(rows, d, w->group_size)), rows, d, w->group_size);
    rq.group = w->group_size;
    rq.bits = w->bits;
    rq.of_x = a.product_of_x;
  }
  const auto wide = [&](auto c) {
    constexpr int C = decltype(c)::value;
    LaunchDependent(quantize ? AddNormWideKernel<C, true> : AddNormWideKernel<C, false>,
                    dim3(static_cast<unsigned>(rows)), dim3(kWideThreads), 0, stream, a.x.f32(), a.x.pitch(),
                    a.o.f32(), a.o.pitch(), d, a.post_weight, a.scale, scaled, next, ldn, a.next_weight,
                    a.eps, rq);
  };
  if (d < kWideRow) {
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    LaunchDependent(AddNormKernel<32>, dim3(static_cast<unsigned>(blocks)), dim3(kRowsPerBlock * 32), 0,
                    stream, a.x.f32(), a.x.pitch(), a.o.f32(), a.o.pitch(), rows, d, a.post_weight, a.scale,
                    scaled, next, ldn, a.next_weight, a.eps, rq);
  } else if (!WithWideRegs(d, wide)) {
    LaunchDependent(AddNormKernel<kWideThreads>, dim3(static_cast<unsigned>(rows)), dim3(kWideThreads), 0,
                    stream, a.x.f32(), a.x.pitch(), a.o.f32(), a.o.pitch(), rows, d, a.post_weight, a.scale,
                    scaled, next, ldn, a.next_weight, a.eps, rq);
  }
  G4_CUDA_LAUNCHED();
  return quantize;
}

}  // namespace g4::cuda
