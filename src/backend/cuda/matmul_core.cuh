// The canonical dot-product order of the CUDA MatMul over dense weights, and
// the per-lane routine of its matrix-vector kernel (shared with the MoE
// experts, which must give MatMul's bits). Affine weights take the integer
// scheme of affine_int8.cuh instead.
//
// Canonical order of y[m, n] = sum_k x[m, k] w[n, k] (w's exact values),
// whatever the number of rows, the kernel or the tiling:
//  - columns are cut into units of 32 (unit u = columns [32u, 32u + 32),
//    the last one shorter for a dense row whose length is not a multiple);
//  - 32 classes: class c owns the units u = c, c + 32, c + 64, ...; its
//    partial p_c = fma(x, w, p_c) over its units ascending, each unit's
//    columns ascending, from p_c = 0;
//  - y = the xor-butterfly sum of p_0..p_31 (device_common.cuh WarpSum:
//    pairs c, c^16 first, then c^8, ..., c^1).
// The matrix-vector kernels give class c to lane c of a warp (one warp per
// weight row, lanes splitting K); the GEMM computes the classes one after
// another and folds them with the butterfly's tree. Neither depends on M,
// so a row's result is bitwise the same in any batch, and a row slice of a
// matrix gives the same bits as the whole.
//
// Two matrix-vector kernels share this order and must keep doing the same
// operations per unit (wv = the exact dense value, then acc = fma(x, wv,
// acc) column by column): MatMul's (matmul.cu, inputs staged in shared memory) and the MoE experts' (moe.cu, LanePartials
// below, over inputs gathered and permuted by PermuteRows: unit u = 32 i +
// c, piece t (4 floats) at ((i * 8 + t) * 32 + c) * 4, so the 32 lanes'
// pieces t of one round are 512 contiguous bytes). The MoE tests check the
// two bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/weight_access.cuh"

namespace g4::cuda {

constexpr int kUnit = 32;     // columns per unit
constexpr int kClasses = 32;  // = lanes
constexpr int64_t kRound = int64_t{kUnit} * kClasses;  // columns per round of the 32 lanes

inline __host__ __device__ int64_t Units(int64_t k) { return (k + kUnit - 1) / kUnit; }
// Floats per permuted row: whole rounds.
inline __host__ __device__ int64_t PermutedStride(int64_t k) { return (k + kRound - 1) / kRound * kRound; }

// Position of column k in a permuted row.
__device__ __forceinline__ int64_t PermutedIndex(int64_t k) {
  const int64_t u = k / kUnit, i = u / kClasses;
  const int c = static_cast<int>(u % kClasses), within = static_cast<int>(k % kUnit);
  return ((i * 8 + within / 4) * kClasses + c) * 4 + within % 4;
}

// acc[r] += xv[c] * wv[r][c] over the unit's first kvalid columns, in
// column order (one fma each): the canonical order's unit step.
template <int NR>
__device__ __forceinline__ void UnitFma(const float (&xv)[kUnit], const float (&wv)[NR][kUnit], int kvalid,
                                        float (&acc)[NR]) {
  if (kvalid == kUnit) {
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int c = 0; c < kUnit; ++c) acc[r] = __fmaf_rn(xv[c], wv[r][c], acc[r]);
  } else {
#pragma unroll
    for (int r = 0; r < NR; ++r)
#pragma unroll
      for (int c = 0; c < kUnit; ++c)
        if (c < kvalid) acc[r] = __fmaf_rn(xv[c], wv[r][c], acc[r]);
  }
}

// acc[m][r] += the unit's columns in order, for weight values wv[r][c]
// (kvalid of them) and lane's permuted input pieces of round i.
template <int MT, int NR>
__device__ __forceinline__ void UnitDot(const float (&wv)[NR][kUnit], int kvalid, const float* xp, int64_t xp_stride,
                                        const int64_t (&xrow)[MT], int64_t i, int lane, float (&acc)[MT][NR]) {
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const float4* xq = reinterpret_cast<const float4*>(xp + xrow[m] * xp_stride) + (i * 8) * kClasses + lane;
    float xv[kUnit];
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float4 f = __ldg(xq + t * kClasses);
      xv[4 * t] = f.x, xv[4 * t + 1] = f.y, xv[4 * t + 2] = f.z, xv[4 * t + 3] = f.w;
    }
    UnitFma<NR>(xv, wv, kvalid, acc[m]);
  }
}

// Lane `lane`'s class partials acc[m][r] for weight rows rows[r] and
// permuted input rows xp + xrow[m] * xp_stride: the canonical p_lane.
template <int FMT, int MT, int NR>
__device__ __forceinline__ void LanePartials(const DevWeight& w, const int64_t (&rows)[NR], const float* xp,
                                             int64_t xp_stride, const int64_t (&xrow)[MT], int lane,
                                             float (&acc)[MT][NR]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[m][r] = 0.0f;
  const int64_t K = w.cols, units = Units(K);
  for (int64_t u = lane; u < units; u += kClasses) {
    const int kvalid = static_cast<int>(K - u * kUnit < kUnit ? K - u * kUnit : kUnit);
    float wv[NR][kUnit];
#pragma unroll
    for (int r = 0; r < NR; ++r) DecodeChunk<FMT>(w, rows[r], u, kvalid, wv[r]);
    UnitDot<MT, NR>(wv, kvalid, xp, xp_stride, xrow, u / kClasses, lane, acc);
  }
}

// Kernel: xp[q] = the permuted row x[src_row(q)] (src_rows null: row q),
// zero past the row's K columns. One thread per float4 of xp.
__global__ void PermuteRowsKernel(const float* __restrict__ x, int64_t ldx, const int32_t* __restrict__ src_rows,
                                  int32_t rows_per_entry, int64_t q_rows, int64_t K, float* __restrict__ xp);

// Host: launches PermuteRowsKernel. Row q of xp is x row src_rows[q] /
// rows_per_entry (rows_per_entry folds MoE (row, slot) pair ids to rows).
void PermuteRows(const float* x, int64_t ldx, const int32_t* src_rows, int32_t rows_per_entry, int64_t q_rows,
                 int64_t K, float* xp, cudaStream_t stream);

}  // namespace g4::cuda
