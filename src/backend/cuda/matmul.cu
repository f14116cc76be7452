// MatMul on the GPU: y = x W^T for every weight format, whatever M is:
//  - affine weights: the CPU backend's integer scheme (affine_int8.cu): the
//    input rows quantized to int8 per group, then dp4a group sums and one
//    float sequence per output; bitwise the CPU backend's result;
//  - dense weights, in the canonical order of matmul_core.cuh:
//  - M <= kGemvMaxRows: the matrix-vector kernel: one warp per NR weight
//    rows and up to MT input rows, lane c computing class c's partials from
//    inputs staged round by round in shared memory, a warp butterfly
//    finishing. Weights are read once per MT input rows (the same rows'
//    blocks run side by side, so repeats hit L2).
//  - more rows: a tiled GEMM (64 x 64 outputs per block, weight tiles
//    dequantized into shared memory once for 64 input rows) that computes
//    the 32 classes one after another and folds them in the butterfly's
//    tree with a five-level stack.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/matmul_core.cuh"
#include "backend/cuda/sub_profile.h"
#include "backend/cuda/matmul.cuh"
#include "core/check.h"

namespace g4::cuda {

// ---------------------------------------------------------------- weights

bool SupportedWeight(const WeightMatrix& w) {
  if (w.rows < 0 || w.cols < 0) return false;
  if (!w.is_affine()) return w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16;
  const bool bits_ok = w.bits == 2 || w.bits == 3 || w.bits == 4 || w.bits == 5 || w.bits == 6 || w.bits == 8;
  const bool group_ok = w.group_size == 32 || w.group_size == 64 || w.group_size == 128;
  const bool scale_ok = w.scale_dtype == DType::kBF16 || w.scale_dtype == DType::kF16 || w.scale_dtype == DType::kF32;
  return bits_ok && group_ok && scale_ok && w.cols % w.group_size == 0;
}

int WeightFormat(const WeightMatrix& w) {
  if (!w.is_affine()) return w.dtype == DType::kF32 ? kWF32 : w.dtype == DType::kBF16 ? kWBF16 : kWF16;
  switch (w.bits) {
    case 2: return kWA2;
    case 3: return kWA3;
    case 4: return kWA4;
    case 5: return kWA5;
    case 6: return kWA6;
    default: return kWA8;
  }
}

DevWeight MakeDevWeight(const WeightMatrix& w) {
  DevWeight d;
  d.rows = w.rows;
  d.cols = w.cols;
  if (w.is_affine()) {
    d.data = w.codes;
    d.scales = w.scales;
    d.biases = w.biases;
    d.row_bytes = w.words_per_row() * 4;
    d.groups_per_row = w.groups_per_row();
    d.group = w.group_size;
    d.scale_type = w.scale_dtype == DType::kF32 ? kSF32 : w.scale_dtype == DType::kBF16 ? kSBF16 : kSF16;
  } else {
    d.data = w.data;
    d.row_bytes = w.cols * static_cast<int64_t>(DTypeSize(w.dtype));
  }
  d.vec16 = reinterpret_cast<uintptr_t>(d.data) % 16 == 0 && d.row_bytes % 16 == 0;
  return d;
}

// ---------------------------------------------------------------- permute

__global__ void PermuteRowsKernel(const float* __restrict__ x, int64_t ldx, const int32_t* __restrict__ src_rows,
                                  int32_t rows_per_entry, int64_t q_rows, int64_t K, float* __restrict__ xp) {
  const int64_t stride4 = PermutedStride(K) / 4;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= q_rows * stride4) return;
  const int64_t q = idx / stride4, f = idx % stride4;
  // f = (i * 8 + t) * 32 + c: unit 32 i + c, floats 4 t .. 4 t + 3 of it.
  const int64_t c = f % kClasses, it = f / kClasses, t = it % 8, i = it / 8;
  const int64_t k0 = (i * kClasses + c) * kUnit + 4 * t;
  const int64_t src = src_rows ? src_rows[q] / rows_per_entry : q;
  const float* row = x + src * ldx;
  float4 v;
  v.x = k0 < K ? row[k0] : 0.0f;
  v.y = k0 + 1 < K ? row[k0 + 1] : 0.0f;
  v.z = k0 + 2 < K ? row[k0 + 2] : 0.0f;
  v.w = k0 + 3 < K ? row[k0 + 3] : 0.0f;
  reinterpret_cast<float4*>(xp)[idx] = v;
}

void PermuteRows(const float* x, int64_t ldx, const int32_t* src_rows, int32_t rows_per_entry, int64_t q_rows,
                 int64_t K, float* xp, cudaStream_t stream) {
  const int64_t n = q_rows * (PermutedStride(K) / 4);
  if (n == 0) return;
  const int threads = 256;
  PermuteRowsKernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
      x, ldx, src_rows, rows_per_entry, q_rows, K, xp);
  G4_CUDA_LAUNCHED();
}

// ---------------------------------------------------------------- GEMV

namespace {

constexpr int kGemvWarps = 4;

// One warp per NR weight rows, MT input rows per block. Round i covers
// units 32 i .. 32 i + 31 (lane c takes unit 32 i + c): the block stages the
// round's 1024 input columns of its MT rows in shared memory, permuted so
// that lane c's pieces are contiguous across the warp, then every warp
// multiplies its rows. Blocks are numbered row block major, M tile
// minor, so a weight row block's M tiles run together.
template <int FMT, int MT, int NR>
__global__ __launch_bounds__(kGemvWarps * 32) void GemvKernel(DevWeight w, const float* __restrict__ x, int64_t ldx,
                                                               bool xvec, int64_t M, int64_t m_tiles,
                                                               float* __restrict__ y, int64_t ldy) {
  __shared__ float4 xs[MT][8 * kClasses];  // [m][piece t][class c]
  const int lane = threadIdx.x & 31;
  const int64_t m_tile = blockIdx.x % m_tiles, row_block = blockIdx.x / m_tiles;
  const int64_t n0 = (row_block * kGemvWarps + (threadIdx.x >> 5)) * NR;
  const bool active = n0 < w.rows;
  int64_t rows[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) rows[r] = min(n0 + r, w.rows - 1);
  const int64_t m0 = m_tile * MT;
  const int64_t K = w.cols, units = Units(K), rounds = (units + kClasses - 1) / kClasses;
  float acc[MT][NR];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int r = 0; r < NR; ++r) acc[m][r] = 0.0f;

  for (int64_t i = 0; i < rounds; ++i) {
    __syncthreads();  // the previous round's inputs are consumed
    for (int f = threadIdx.x; f < MT * 256; f += kGemvWarps * 32) {
      const int m = f >> 8, q = f & 255;
      const int64_t k = i * kRound + 4 * q, row = min(m0 + m, M - 1);
      const float* xr = x + row * ldx;
      float4 v;
      if (xvec && k + 3 < K) {
        v = *reinterpret_cast<const float4*>(xr + k);
      } else {
        v.x = k < K ? xr[k] : 0.0f;
        v.y = k + 1 < K ? xr[k + 1] : 0.0f;
        v.z = k + 2 < K ? xr[k + 2] : 0.0f;
        v.w = k + 3 < K ? xr[k + 3] : 0.0f;
      }
      xs[m][(q & 7) * kClasses + (q >> 3)] = v;
    }
    __syncthreads();
    const int64_t u = i * kClasses + lane;
    if (!active || u >= units) continue;
    const int kvalid = static_cast<int>(K - u * kUnit < kUnit ? K - u * kUnit : kUnit);
    float wv[NR][kUnit];
#pragma unroll
    for (int r = 0; r < NR; ++r) DecodeChunk<FMT>(w, rows[r], u, kvalid, wv[r]);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      float xv[kUnit];
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float4 f = xs[m][t * kClasses + lane];
        xv[4 * t] = f.x, xv[4 * t + 1] = f.y, xv[4 * t + 2] = f.z, xv[4 * t + 3] = f.w;
      }
      UnitFma<NR>(xv, wv, kvalid, acc[m]);
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

template <int FMT, int MT>
void LaunchGemv(const DevWeight& w, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy,
                cudaStream_t stream) {
  constexpr int NR = MT <= 4 ? 2 : 1;
  const bool xvec = reinterpret_cast<uintptr_t>(x) % 16 == 0 && (ldx % 4 == 0 || M == 1);
  const int64_t m_tiles = (M + MT - 1) / MT;
  const int64_t row_blocks = (w.rows + kGemvWarps * NR - 1) / (kGemvWarps * NR);
  GemvKernel<FMT, MT, NR><<<static_cast<unsigned>(row_blocks * m_tiles), kGemvWarps * 32, 0, stream>>>(
      w, x, ldx, xvec, M, m_tiles, y, ldy);
  G4_CUDA_LAUNCHED();
}

template <int FMT>
void GemvForFormat(const DevWeight& w, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy,
                   cudaStream_t stream) {
  if (M == 1) return LaunchGemv<FMT, 1>(w, x, ldx, M, y, ldy, stream);
  if (M == 2) return LaunchGemv<FMT, 2>(w, x, ldx, M, y, ldy, stream);
  if (M <= 4) return LaunchGemv<FMT, 4>(w, x, ldx, M, y, ldy, stream);
  return LaunchGemv<FMT, 8>(w, x, ldx, M, y, ldy, stream);
}

// ---------------------------------------------------------------- GEMM

constexpr int kBM = 64, kBN = 64, kFill = 4;  // units per shared-memory fill
constexpr int kPad = kBM + 4;                  // tile row stride (floats)
constexpr size_t kGemmSmem = 2 * size_t{kFill} * kUnit * kPad * sizeof(float);

using Tile = float[4][4];

__device__ __forceinline__ void TileZero(Tile& a) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[i][j] = 0.0f;
}
// a = s + a (the earlier subtree on the left, as the butterfly adds).
__device__ __forceinline__ void TileFold(const Tile& s, Tile& a) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) a[i][j] = s[i][j] + a[i][j];
}
__device__ __forceinline__ void TileCopy(const Tile& a, Tile& s) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) s[i][j] = a[i][j];
}

// plain: one pass over the units in order, no class folding (not
// batch-invariant against the matrix-vector kernel; G4_CUDA_NONINVARIANT=1,
// only to measure what the canonical order costs).
template <int FMT>
__global__ __launch_bounds__(256) void GemmKernel(DevWeight w, const float* __restrict__ x, int64_t ldx, int64_t M,
                                                  float* __restrict__ y, int64_t ldy, bool plain) {
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);  // [kFill][32][kPad]: x tile, k major
  float* ws = xs + kFill * kUnit * kPad;        // [kFill][32][kPad]: weight tile, k major
  const int t = threadIdx.x, tm = t >> 4, tn = t & 15;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM, n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t K = w.cols, units = Units(K);
  Tile s0, s1, s2, s3, s4, p;
  TileZero(s0), TileZero(s1), TileZero(s2), TileZero(s3), TileZero(s4);
  const int leaves = plain ? 1 : kClasses;
  const int64_t ustep = plain ? 1 : kClasses;
  for (int leaf = 0; leaf < leaves; ++leaf) {
    const int cls = plain ? 0 : static_cast<int>(__brev(static_cast<unsigned>(leaf)) >> 27);
    TileZero(p);
    for (int64_t u0 = cls; u0 < units; u0 += ustep * kFill) {
      __syncthreads();  // the previous fill is consumed
      {
        // Weights: thread t decodes unit u0 + 32 g of weight row n0 + r.
        const int g = t >> 6, r = t & 63;
        const int64_t u = u0 + ustep * g, n = n0 + r;
        if (u < units) {
          const int kv = static_cast<int>(K - u * kUnit < kUnit ? K - u * kUnit : kUnit);
          float v[kUnit];
          if (n < w.rows) {
            DecodeChunk<FMT>(w, n, u, kv, v);
          } else {
#pragma unroll
            for (int c = 0; c < kUnit; ++c) v[c] = 0.0f;
          }
#pragma unroll
          for (int c = 0; c < kUnit; ++c) ws[(g * kUnit + c) * kPad + r] = v[c];
        }
      }
      // Inputs: kFill x 64 rows x 32 columns.
#pragma unroll 4
      for (int q = 0; q < kFill * 8; ++q) {
        const int idx = t + 256 * q;
        const int g = idx >> 11, rem = idx & 2047, r = rem >> 5, c = rem & 31;
        const int64_t u = u0 + ustep * g, k = u * kUnit + c, m = m0 + r;
        float v = 0.0f;
        if (u < units && k < K && m < M) v = x[m * ldx + k];
        xs[(g * kUnit + c) * kPad + r] = v;
      }
      __syncthreads();
#pragma unroll 1
      for (int g = 0; g < kFill; ++g) {
        const int64_t u = u0 + ustep * g;
        if (u >= units) break;
        const int kv = static_cast<int>(K - u * kUnit < kUnit ? K - u * kUnit : kUnit);
        const float* xg = xs + g * kUnit * kPad + tm * 4;
        const float* wg = ws + g * kUnit * kPad + tn * 4;
#pragma unroll 8
        for (int k = 0; k < kv; ++k) {
          const float4 a = *reinterpret_cast<const float4*>(xg + k * kPad);
          const float4 b = *reinterpret_cast<const float4*>(wg + k * kPad);
          const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) p[i][j] = __fmaf_rn(av[i], bv[j], p[i][j]);
        }
      }
    }
    if (plain) break;
    // Fold leaf `leaf` (class bitrev(leaf)) into the butterfly tree: leaves
    // come in the tree's in-order sequence, siblings adjacent.
    if (leaf & 1) {
      TileFold(s0, p);
      if (leaf & 2) {
        TileFold(s1, p);
        if (leaf & 4) {
          TileFold(s2, p);
          if (leaf & 8) {
            TileFold(s3, p);
            if (leaf & 16) {
              TileFold(s4, p);  // the root: p is the result
            } else {
              TileCopy(p, s4);
            }
          } else {
            TileCopy(p, s3);
          }
        } else {
          TileCopy(p, s2);
        }
      } else {
        TileCopy(p, s1);
      }
    } else {
      TileCopy(p, s0);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + tm * 4 + i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tn * 4 + j;
      if (n < w.rows) y[m * ldy + n] = p[i][j];
    }
  }
}

template <int FMT>
void LaunchGemm(const DevWeight& w, const float* x, int64_t ldx, int64_t M, float* y, int64_t ldy,
                cudaStream_t stream) {
  static bool configured = false;  // one thread drives the backend
  if (!configured) {
    G4_CUDA_CHECK(cudaFuncSetAttribute(GemmKernel<FMT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kGemmSmem)));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>((w.rows + kBN - 1) / kBN), static_cast<unsigned>((M + kBM - 1) / kBM));
  G4_CHECK_MSG(grid.y <= 65535, "[cuda] MatMul: too many rows for one launch");
  static const bool plain = [] {
    const char* e = std::getenv("G4_CUDA_NONINVARIANT");
    return e != nullptr && e[0] == '1';
  }();
  GemmKernel<FMT><<<grid, 256, kGemmSmem, stream>>>(w, x, ldx, M, y, ldy, plain);
  G4_CUDA_LAUNCHED();
}

template <int FMT>
void MatMulDense(const DevWeight& w, const TensorView& x, const TensorView& y, cudaStream_t stream) {
  const int64_t M = x.rows;
  const int64_t ldx = M > 1 ? x.stride : x.cols, ldy = M > 1 ? y.stride : y.cols;
  if (M <= kGemvMaxRows) {
    SubProfile sp(stream, w.rows * w.cols >= (int64_t{1} << 24) ? "matmul gemv (>=16M weights)" : "matmul gemv (small)");
    GemvForFormat<FMT>(w, x.f32(), ldx, M, y.f32(), ldy, stream);
  } else {
    LaunchGemm<FMT>(w, x.f32(), ldx, M, y.f32(), ldy, stream);
  }
}

// Whether MatMul hands M input rows times `products` to the few-row
// tensor-core kernel (when it takes them; over 32 rows in launches of 32
// rows): 2 to 16 rows always; 17 to 64 when the tensor-core tiled kernel
// (64 weight rows a block at 17-32 rows, 128 at 33-64) would run fewer
// blocks than the device has SMs: there the tiled kernel leaves SMs idle,
// while on wide products it reads the inputs from L2 a quarter as often
// (H100, 32 input rows: 2048 x 2560 22.3 -> 11.8 us, 10240 x 2560 28.3 ->
// 35.3 us, before the few-row kernel staged its pass data). At 17-32 rows
// also where the tiled kernel's waves are less than 90 % full (its last
// wave mostly idle): H100, 32 rows, tiled against few-row, 10240 x 2560
// (160 blocks in 264 slots) 28.3 against 26.4 us, 31b's gate/up 43008 x
// 5376 (672 blocks in three waves) 178 against 162; where its waves are
// full the tiled kernel stays ahead (15360 x 3840, 240 blocks: 46.1
// against 53.1 us; 16384 x 5376, 256: 66.0 against 73.3;
// docs/benchmarks.md, 2026-12-06 night). G4_CUDA_ROWS_MMA=0 never
// (measuring), N >= 2: every row count up to N; unset or 1: the rule above
// (kRowsMmaByDefault; false: never); G4_CUDA_ROWS_FILL=0 leaves out the
// waves' test (measuring).
bool RowsMmaFor(int64_t M, std::span<const AffineOut> products) {
  static const int64_t up_to = [] {
    const char* e = std::getenv("G4_CUDA_ROWS_MMA");
    return e && *e ? std::atoll(e) : (kRowsMmaByDefault ? 1 : 0);
  }();
  if (up_to == 0 || M < 2) return false;
  if (up_to >= 2) return M <= up_to;
  if (M <= 16) return true;
  if (M > 64) return false;
  const AffineMmaBlock tile = AffineMmaBlockFor(M);
  int64_t tiled_blocks = 0;
  for (const AffineOut& o : products) tiled_blocks += (o.w.rows + tile.weight_rows - 1) / tile.weight_rows;
  if (tiled_blocks < SmCount()) return true;
  static const bool fill_rule = EnvSwitchOn("G4_CUDA_ROWS_FILL");
  if (M > 32 || !fill_rule) return false;
  return tiled_blocks * 10 < Waves(tiled_blocks, tile.per_sm) * ResidentSlots(tile.per_sm) * 9;
}

// The few-row kernel over M input rows in launches of at most
// kRowsMmaMaxRowsIn (the rows of one launch are independent of the others',
// so the bits are those of one launch).
void RowsMmaInSlices(std::span<const AffineOut> products, int bits, const QRows& qr, int64_t M, cudaStream_t stream) {
  constexpr int64_t kSlice = kRowsMmaMaxRowsIn;
  for (int64_t m0 = 0; m0 < M; m0 += kSlice) {
    const int64_t m = std::min(kSlice, M - m0);
    const QRows part{qr.q + m0 * qr.ldq, qr.ldq, qr.d + m0 * qr.ldg, qr.xs + m0 * qr.ldg, qr.ldg};
    AffineOut outs[kMaxAffineOuts];
    for (size_t i = 0; i < products.size(); ++i) {
      outs[i] = products[i];
      outs[i].y += m0 * outs[i].ldy;
    }
    const std::span<const AffineOut> slice(outs, products.size());
    if (m == 1) AffineInt8RowMatMul(slice, bits, part, stream);  // a lone last row: the one-row kernel, the same bits
    else AffineInt8RowsMmaMatMul(slice, bits, part, m, stream);
  }
}

// Products of x with affine matrices of one bit width, group size and
// column count, ys[i] = x ws[i]^T, or with u (gated) (gelu_tanh(x) * u)
// ws[i]^T: x quantized once (by the op before, with x_quantized), then one
// launch: the few-row tensor-core kernel where RowsMmaFor says so and it
// takes the products (a launch per
// 32 rows), else the one-row kernel for one row, the tensor-core kernel
// from AffineMmaMinRows() rows, the tiled kernel below that.
void MatMulAffine(std::span<const WeightMatrix* const> ws, const TensorView& x, const TensorView* u,
                  std::span<const TensorView> ys, Scratch& scratch, cudaStream_t stream, bool x_quantized) {
  const WeightMatrix& w0 = *ws[0];
  const int64_t M = x.rows, K = w0.cols;
  const int64_t ldx = M > 1 ? x.stride : x.cols;
  const float* up = u ? u->f32() : nullptr;
  const int64_t ldu = u ? (M > 1 ? u->stride : u->cols) : 0;
  AffineOut outs[kMaxAffineOuts];
  int64_t weights = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    outs[i].w = MakeDevWeight(*ws[i]);
    outs[i].y = ys[i].f32();
    outs[i].ldy = M > 1 ? ys[i].stride : ys[i].cols;
    weights += ws[i]->rows * ws[i]->cols;
  }
  const QRows qr = QRowsIn(scratch.Get(Scratch::kQuant, QRowsBytes(M, K, w0.group_size)), M, K, w0.group_size);
  if (!x_quantized) {
    SubProfile sp(stream, "matmul quantize rows");
    QuantizeRows(x.f32(), ldx, up, ldu, nullptr, 1, M, K, w0.group_size, w0.bits, qr, stream);
  }
  const std::span<const AffineOut> products(outs, ws.size());
  if (RowsMmaFor(M, products) && AffineInt8RowsMmaMatMulTakes(products, w0.bits, std::min(M, kRowsMmaMaxRowsIn))) {
    SubProfile sp(stream, "matmul int8 rows mma");
    return RowsMmaInSlices(products, w0.bits, qr, M, stream);
  }
  if (M >= AffineMmaMinRows()) {
    SubProfile sp(stream, M > 64 ? "matmul int8 mma (>64 rows)" : "matmul int8 mma (<=64 rows)");
    const int bm = AffineMmaTileRows(M);
    return AffineInt8MmaMatMul(products, w0.bits, qr, {.M = M}, bm, (M + bm - 1) / bm, stream);
  }
  if (M == 1) {
    SubProfile sp(stream, weights >= (int64_t{1} << 24) ? "matmul int8 row (>=16M weights)" : "matmul int8 row (small)");
    return AffineInt8RowMatMul(products, w0.bits, qr, stream);
  }
  TileSource src;
  src.M = M;
  const int mt = M == 2 ? 2 : M <= 4 ? 4 : 8;
  SubProfile sp(stream, M > 64 ? "matmul int8 (>64 rows)" : weights >= (int64_t{1} << 24)
                                                                 ? "matmul int8 (>=16M weights)"
                                                                 : "matmul int8 (small)");
  AffineInt8MatMul(products, w0.bits, qr, src, mt, (M + mt - 1) / mt, stream);
}

}  // namespace

void MatMul(const TensorView& x, const WeightMatrix& w, const TensorView& y, Scratch& scratch, cudaStream_t stream,
            bool x_quantized) {
  const DevWeight d = MakeDevWeight(w);
  switch (WeightFormat(w)) {
    case kWF32: return MatMulDense<kWF32>(d, x, y, stream);
    case kWBF16: return MatMulDense<kWBF16>(d, x, y, stream);
    case kWF16: return MatMulDense<kWF16>(d, x, y, stream);
    default: {
      const WeightMatrix* one = &w;
      return MatMulAffine(std::span<const WeightMatrix* const>(&one, 1), x, nullptr,
                          std::span<const TensorView>(&y, 1), scratch, stream, x_quantized);
    }
  }
}

void MatMuls(const TensorView& x, std::span<const WeightMatrix* const> ws, std::span<const TensorView> ys,
             Scratch& scratch, cudaStream_t stream, bool x_quantized) {
  const WeightMatrix& w0 = *ws[0];
  bool together = w0.is_affine() && ws.size() <= static_cast<size_t>(kMaxAffineOuts);
  for (const WeightMatrix* w : ws)
    together = together && w->is_affine() && w->bits == w0.bits && w->group_size == w0.group_size &&
               w->cols == w0.cols && w->rows > 0;
  if (!together) {
    for (size_t i = 0; i < ws.size(); ++i)
      if (ws[i]->rows > 0) MatMul(x, *ws[i], ys[i], scratch, stream);
    return;
  }
  MatMulAffine(ws, x, nullptr, ys, scratch, stream, x_quantized);
}

void GatedMatMul(const TensorView& g, const TensorView& u, const WeightMatrix& w, const TensorView& y,
                 Scratch& scratch, cudaStream_t stream) {
  if (!w.is_affine()) {
    GeluMul(g, u, g, stream);
    return MatMul(g, w, y, scratch, stream);
  }
  const WeightMatrix* one = &w;
  MatMulAffine(std::span<const WeightMatrix* const>(&one, 1), g, &u, std::span<const TensorView>(&y, 1), scratch,
               stream, false);
}

}  // namespace g4::cuda
