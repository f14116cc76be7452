// MoE on the GPU: routing (softmax, top-k, renormalize, per-expert scale;
// one warp per row, the host reference's float order) and the routed
// experts, grouped by expert on the device:
//  1. one block sorts the step's (row, slot) pairs by expert (order within
//     an expert is arbitrary: every pair is computed on its own) and cuts
//     each expert's pairs into tiles of at most MT;
//  2. the pairs' input rows are gathered: quantized to int8 for affine
//     weights (affine_int8.cuh), permuted for dense ones (matmul_core.cuh);
//  3. per tile, the tile's expert multiplies them: gate and up, GeluMul,
//     then down, each output computed as MatMul computes it (affine
//     weights: AffineInt8MatMul or AffineInt8MmaMatMul itself over the
//     plan's tiles; dense: the per-lane routine of matmul_core.cuh), so a
//     pair's result is the bits MatMul + GeluMul give for that row alone;
//  4. per row, out = fma(weight, expert output, out) from zero over its
//     experts in ascending id (ties: ascending slot).
// Nothing depends on which other rows are in the step.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/matmul.cuh"
#include "backend/cuda/matmul_core.cuh"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace g4::cuda {
namespace {

// ---------------------------------------------------------------- routing

constexpr int kRouteWarps = 4;

// The warp's best (probability desc, expert asc) candidate, in every lane:
// both routing kernels' loop. A macro: as a function over references it
// changed both kernels' PTX, and this keeps the code measured on the GPU.
#define G4_WARP_ARG_MAX(best, best_e)                                 \
  _Pragma("unroll") for (int o = 16; o >= 1; o >>= 1) {                \
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);            \
    const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);            \
    if (ob > best || (ob == best && oe < best_e)) {                    \
      best = ob;                                                       \
      best_e = oe;                                                     \
    }                                                                  \
  }

__global__ __launch_bounds__(kRouteWarps * 32) void RouteKernel(const float* __restrict__ logits, int64_t ldl,
                                                                 int64_t rows, int experts, int k,
                                                                 const float* __restrict__ scale, int32_t* ids,
                                                                 int64_t ldi, float* weights, int64_t ldw) {
  extern __shared__ float prob_all[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= rows) return;
  float* prob = prob_all + warp * experts;
  const float* l = logits + t * ldl;
  // max, then exp(l - max), then the sum in expert order (lane 0).
  float mx = -INFINITY;
  for (int e = lane; e < experts; e += 32) mx = fmaxf(mx, l[e]);
  mx = WarpMax(mx);
  // The reference starts from logits[0] and keeps the larger: the same max.
  for (int e = lane; e < experts; e += 32) prob[e] = expf(l[e] - mx);
  __syncwarp();
  float sum = 0.0f;
  if (lane == 0)
    for (int e = 0; e < experts; ++e) sum += prob[e];
  sum = __shfl_sync(0xffffffffu, sum, 0);
  for (int e = lane; e < experts; e += 32) prob[e] = prob[e] / sum;
  __syncwarp();
  // Top k by (probability desc, expert asc): k rounds of a warp arg-max.
  float top_sum = 0.0f;
  int chosen[64];
  float chosen_p[64];
  for (int j = 0; j < k; ++j) {
    float best = -1.0f;
    int best_e = experts;
    for (int e = lane; e < experts; e += 32) {
      bool taken = false;
      for (int q = 0; q < j; ++q) taken |= chosen[q] == e;
      const float p = prob[e];
      if (!taken && (p > best || (p == best && e < best_e))) {
        best = p;
        best_e = e;
      }
    }
    G4_WARP_ARG_MAX(best, best_e)
    chosen[j] = best_e;
    chosen_p[j] = best;
    top_sum += best;  // in selection order, as the reference
  }
  if (lane == 0) {
    for (int j = 0; j < k; ++j) {
      ids[t * ldi + j] = chosen[j];
      weights[t * ldw + j] = chosen_p[j] / top_sum * scale[chosen[j]];
    }
  }
}

// The same routing with a lane's experts (e = lane + 32 i, i < NPL) in
// registers and the taken ones in a bit mask: no local-memory arrays in the
// top-k rounds (RouteKernel took 11.7 us per 26b-a4b layer at one row).
// Every comparison and float operation is RouteKernel's, so the result is.
template <int NPL>
__global__ __launch_bounds__(kRouteWarps * 32) void RouteRegsKernel(const float* __restrict__ logits, int64_t ldl,
                                                                    int64_t rows, int experts, int k,
                                                                    const float* __restrict__ scale, int32_t* ids,
                                                                    int64_t ldi, float* weights, int64_t ldw) {
  FollowPredecessor();  // the router's logits
  __shared__ float prob_all[kRouteWarps][NPL * 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= rows) return;
  float* prob = prob_all[warp];
  const float* l = logits + t * ldl;
  float v[NPL];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < experts ? l[e] : -INFINITY;
    if (e < experts) mx = fmaxf(mx, v[i]);
  }
  mx = WarpMax(mx);
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int e = lane + 32 * i;
    if (e < experts) prob[e] = v[i] = expf(v[i] - mx);
  }
  __syncwarp();
  float sum = 0.0f;
  if (lane == 0)
    for (int e = 0; e < experts; ++e) sum += prob[e];
  sum = __shfl_sync(0xffffffffu, sum, 0);
#pragma unroll
  for (int i = 0; i < NPL; ++i) v[i] = v[i] / sum;
  unsigned taken = 0;
  float top_sum = 0.0f, my_p = 0.0f;
  int my_e = 0;
  for (int j = 0; j < k; ++j) {
    float best = -1.0f;
    int best_e = experts;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int e = lane + 32 * i;
      if (e < experts && !(taken >> i & 1u) && (v[i] > best || (v[i] == best && e < best_e))) {
        best = v[i];
        best_e = e;
      }
    }
    G4_WARP_ARG_MAX(best, best_e)
    if (best_e < experts && (best_e & 31) == lane) taken |= 1u << (best_e >> 5);
    if (lane == j) my_e = best_e, my_p = best;
    top_sum += best;  // in selection order, as the reference
  }
  if (lane < k) {
    ids[t * ldi + lane] = my_e;
    weights[t * ldw + lane] = my_p / top_sum * scale[my_e];
  }
}

// ---------------------------------------------------------------- experts

struct ExpertPtrs {
  const void* data;
  const void* scales;
  const void* biases;
};

// Whether every expert's codes and code rows are 16-byte aligned (what the
// tensor-core one-row kernel's loads need).
bool AllCodesAligned(std::span<const WeightMatrix> ms, int64_t experts) {
  for (int64_t e = 0; e < experts; ++e) {
    const WeightMatrix& w = ms[static_cast<size_t>(e)];
    if (!w.is_affine() || reinterpret_cast<uintptr_t>(w.codes) % 16 != 0 || (w.cols * w.bits / 8) % 16 != 0)
      return false;
  }
  return true;
}

// Per expert, the device pointers of gate, up and down: [3][E], cached by
// content (a layer's experts are placed once; tests build new ones).
const ExpertPtrs* ExpertTable(const MoeExpertsArgs& a) {
  const size_t E = a.gate.size();
  std::vector<ExpertPtrs> host(3 * E);
  for (size_t e = 0; e < E; ++e) {
    const WeightMatrix* m[3] = {&a.gate[e], &a.up[e], &a.down[e]};
    for (int i = 0; i < 3; ++i) {
      const WeightMatrix& w = *m[i];
      host[i * E + e] = w.is_affine() ? ExpertPtrs{w.codes, w.scales, w.biases} : ExpertPtrs{w.data, nullptr, nullptr};
    }
  }
  std::string key(reinterpret_cast<const char*>(host.data()), host.size() * sizeof(ExpertPtrs));
  static std::mutex mu;
  static std::unordered_map<std::string, ExpertPtrs*> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  ExpertPtrs* dev = nullptr;
  G4_CUDA_CHECK(cudaMalloc(&dev, key.size()));
  G4_CUDA_CHECK(cudaMemcpy(dev, host.data(), key.size(), cudaMemcpyHostToDevice));
  cache.emplace(std::move(key), dev);
  return dev;
}

// Work layout in the MoE scratch (int32 unless noted), for P pairs, E experts.
// (Counts and offsets per expert live in the sort's shared memory only.)
struct Plan {
  int32_t* order;        // [P] slot -> pair
  int32_t* slot_of;      // [P] pair -> slot
  int32_t* tile_expert;  // [max tiles]
  int32_t* tile_start;
  int32_t* tile_count;
  int32_t* num_tiles;    // [1]
};

// The one-row kernel's view of one expert matrix (gate, up or down) for
// the decode path: where the pairs' outputs go and how its rows are laid out.
struct ExpertRowMatrix {
  float* y;           // slot s's output row at y + s * ldy
  int64_t ldy;
  int64_t row_bytes;  // of the codes
  int32_t rows;       // the matrix's rows (outputs per pair)
  int32_t scale_type;
  int32_t vec16;      // row_bytes 16-byte aligned (each expert's codes are checked too)
};

// Decode (one pair per tile): the products of AffineInt8RowMatMulTable,
// written as the pairs are sorted. products[m * P + slot] is matrix m (0
// gate, 1 up, 2 down) of the slot's expert; gate and up are one launch
// (units 0 .. 2P * width), down another.
struct ExpertRows {
  RowProduct* products = nullptr;  // [3 * P], or null: not this path
  const ExpertPtrs* table = nullptr;
  int32_t experts = 0, pairs = 0;
  ExpertRowMatrix m[3];
};

// One block: counts per expert in shared memory, then warp 0 scans them
// (offsets and tile offsets, 32 experts per pass), then each pair takes a
// slot of its expert. A serial scan over global counts took 12.7 us per
// layer on 26b-a4b (128 experts).
__global__ __launch_bounds__(1024) void SortPairsKernel(const int32_t* __restrict__ ids, int64_t ldi, int64_t rows,
                                                        int k, int experts, int mt, Plan p, ExpertRows er) {
  FollowPredecessor();  // the routing
  extern __shared__ int32_t sort_shared[];
  int32_t* count = sort_shared;                      // [E]: counts, then each expert's next free slot
  int32_t* offset = sort_shared + experts;           // [E]: the expert's first slot
  int32_t* tile_offset = sort_shared + 2 * experts;  // [E]: the expert's first tile
  const int64_t pairs = rows * k;
  for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t q = threadIdx.x; q < pairs; q += blockDim.x) {
    const int32_t e = ids[(q / k) * ldi + q % k];
    if (e < 0 || e >= experts) __trap();  // ops.h: expert ids in range
    atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int32_t off = 0, tiles = 0;
    for (int e0 = 0; e0 < experts; e0 += 32) {
      const int e = e0 + lane;
      const int32_t c = e < experts ? count[e] : 0, t = (c + mt - 1) / mt;
      int32_t ci = c, ti = t;  // inclusive sums over the pass
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int32_t oc = __shfl_up_sync(0xffffffffu, ci, d), ot = __shfl_up_sync(0xffffffffu, ti, d);
        if (lane >= d) ci += oc, ti += ot;
      }
      if (e < experts) offset[e] = off + ci - c, tile_offset[e] = tiles + ti - t;
      off += __shfl_sync(0xffffffffu, ci, 31);
      tiles += __shfl_sync(0xffffffffu, ti, 31);
    }
    if (lane == 0) *p.num_tiles = tiles;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t q = threadIdx.x; q < pairs; q += blockDim.x) {
    const int32_t e = ids[(q / k) * ldi + q % k];
    const int32_t slot = offset[e] + atomicAdd(&count[e], 1);
    p.order[slot] = static_cast<int32_t>(q);
    p.slot_of[q] = slot;
    if (er.products) {  // one pair per tile: tile `slot` is this pair
#pragma unroll
      for (int m = 0; m < 3; ++m) {
        const ExpertRowMatrix& mx = er.m[m];
        const ExpertPtrs ptr = er.table[m * er.experts + e];
        const int32_t first = ((m == 1 ? er.pairs : 0) + slot) * mx.rows;
        er.products[m * er.pairs + slot] =
            RowProduct{static_cast<const uint8_t*>(ptr.data),
                       ptr.scales,
                       ptr.biases,
                       mx.y + slot * mx.ldy,
                       mx.row_bytes,
                       first,
                       first + mx.rows,
                       static_cast<int16_t>(mx.scale_type),
                       static_cast<int16_t>(mx.vec16 && reinterpret_cast<uintptr_t>(ptr.data) % 16 == 0 ? 1 : 0),
                       slot};
      }
    }
  }
  __syncthreads();  // count[e] is the expert's count again
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    const int32_t n = count[e];
    for (int32_t i = 0; i * mt < n; ++i) {
      const int32_t tile = tile_offset[e] + i;
      p.tile_expert[tile] = e;
      p.tile_start[tile] = offset[e] + i * mt;
      p.tile_count[tile] = min(mt, n - i * mt);
    }
  }
}

constexpr int kMoeWarps = 4;
constexpr int kMoeTile = 8;  // pairs per tile when experts get several (AffineInt8MatMul's largest tile)
constexpr int kMoeMmaTile = 32;  // the same when every matrix is affine (AffineInt8MmaMatMul's tiles)

// out[slot, n] for the slots of tile blockIdx.y and weight rows of this
// block's warps: expert tile_expert's matrix `which` (0 gate, 1 up, 2 down).
template <int FMT, int MT>
__global__ __launch_bounds__(kMoeWarps * 32) void MoeGemvKernel(DevWeight w, const ExpertPtrs* __restrict__ table,
                                                                 int experts, Plan p, const float* __restrict__ xp,
                                                                 int64_t xp_stride, float* __restrict__ out,
                                                                 int64_t ldo) {
  const int tile = blockIdx.y;
  if (tile >= *p.num_tiles) return;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kMoeWarps + (threadIdx.x >> 5);
  if (n0 >= w.rows) return;
  const int lane = threadIdx.x & 31;
  const int e = p.tile_expert[tile], start = p.tile_start[tile], count = p.tile_count[tile];
  const ExpertPtrs ptr = table[e];
  w.data = ptr.data;
  w.scales = ptr.scales;
  w.biases = ptr.biases;
  w.vec16 = w.vec16 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
  int64_t rows[1] = {n0}, xrow[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) xrow[m] = start + min(m, count - 1);
  float acc[MT][1];
  LanePartials<FMT, MT, 1>(w, rows, xp, xp_stride, xrow, lane, acc);
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const float v = WarpSum(acc[m][0]);
    if (lane == m % 32 && m < count) out[(start + m) * ldo + n0] = v;
  }
}

template <int FMT>
void LaunchMoeGemv(int mt, const DevWeight& w, const ExpertPtrs* table, int experts, const Plan& p, int max_tiles,
                   const float* xp, int64_t xp_stride, float* out, int64_t ldo, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.rows + kMoeWarps - 1) / kMoeWarps), static_cast<unsigned>(max_tiles));
  if (mt == 1) {
    MoeGemvKernel<FMT, 1><<<grid, kMoeWarps * 32, 0, stream>>>(w, table, experts, p, xp, xp_stride, out, ldo);
  } else {
    MoeGemvKernel<FMT, kMoeTile><<<grid, kMoeWarps * 32, 0, stream>>>(w, table, experts, p, xp, xp_stride, out, ldo);
  }
  G4_CUDA_LAUNCHED();
}

// An expert matrix's inputs, prepared once: quantized rows (affine
// weights) or permuted rows (dense), so gate and up share them when their
// formats agree.
struct ExpertInputs {
  bool affine = false;
  int bits = 0, group = 0;
  QRows qr;              // affine
  float* perm = nullptr;  // dense: P permuted rows
};

// The inputs x[src_rows[slot] / per_entry] (x[slot] without src_rows) as
// matrix w0 needs them; `prev`, when it already holds them in that form,
// is returned as is. With u (affine w0 only), the inputs are gelu(x) * u
// quantized as they are read (GeluMul's bits).
ExpertInputs PrepareInputs(const WeightMatrix& w0, const ExpertInputs* prev, const float* x, int64_t ldx,
                           const float* u, const int32_t* src_rows, int per_entry, int64_t P, float* perm,
                           Scratch& scratch, cudaStream_t stream) {
  const int64_t K = w0.cols;
  if (prev && prev->affine == w0.is_affine() &&
      (!w0.is_affine() || (prev->bits == w0.bits && prev->group == w0.group_size)))
    return *prev;
  ExpertInputs in;
  in.affine = w0.is_affine();
  if (in.affine) {
    in.bits = w0.bits;
    in.group = w0.group_size;
    in.qr = QRowsIn(scratch.Get(Scratch::kQuant, QRowsBytes(P, K, in.group)), P, K, in.group);
    QuantizeRows(x, ldx, u, ldx, src_rows, per_entry, P, K, in.group, in.bits, in.qr, stream);
  } else {
    G4_CHECK_MSG(u == nullptr, "[cuda] MoeExperts: gated inputs of a dense matrix");
    in.perm = perm;
    PermuteRows(x, ldx, src_rows, per_entry, P, K, perm, stream);
  }
  return in;
}

// out[slot] = the slot's inputs times expert matrix w0 of the slot's tile.
void ExpertMatMul(const WeightMatrix& w0, const ExpertInputs& in, const ExpertPtrs* table, int experts,
                  const Plan& p, int mt, int max_tiles, float* out, int64_t ldo, cudaStream_t stream) {
  const DevWeight w = MakeDevWeight(w0);
  if (in.affine) {
    TileSource src;
    src.num_tiles = p.num_tiles;
    src.tile_expert = p.tile_expert;
    src.tile_start = p.tile_start;
    src.tile_count = p.tile_count;
    src.table = reinterpret_cast<const void* const*>(table);
    if (mt == kMoeMmaTile) {
      const AffineOut one{w, out, ldo};
      return AffineInt8MmaMatMul(std::span<const AffineOut>(&one, 1), w0.bits, in.qr, src, kMoeMmaTile, max_tiles,
                                 stream);
    }
    AffineInt8MatMul(w, w0.bits, in.qr, src, mt, max_tiles, out, ldo, stream);
    return;
  }
  const int64_t stride = PermutedStride(w0.cols);
  switch (WeightFormat(w0)) {
    case kWF32: return LaunchMoeGemv<kWF32>(mt, w, table, experts, p, max_tiles, in.perm, stride, out, ldo, stream);
    case kWBF16: return LaunchMoeGemv<kWBF16>(mt, w, table, experts, p, max_tiles, in.perm, stride, out, ldo, stream);
    default: return LaunchMoeGemv<kWF16>(mt, w, table, experts, p, max_tiles, in.perm, stride, out, ldo, stream);
  }
}

__global__ void GeluMulFlatKernel(float* g, const float* u, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) g[i] = GeluTanh(g[i]) * u[i];
}

// out[t, c] = sum over the row's experts in ascending id (ties: ascending j) of
// fma(weight, y[slot], .), from zero. Block (column tile, row t): the row's
// order is computed once (entry j's rank = the entries before it in (id,
// j) order) into shared memory, then each thread runs its column's chain.
// Grid: x the rows, y the column tiles of 256.
__global__ void CombineKernel(const int32_t* __restrict__ ids, int64_t ldi, const float* __restrict__ wts,
                              int64_t ldw, int k, const int32_t* __restrict__ slot_of, const float* __restrict__ y,
                              int64_t hidden, float* out, int64_t ldo) {
  FollowPredecessor();  // the experts' outputs
  extern __shared__ float combine_shared[];
  float* weight = combine_shared;                                // [k], in summation order
  int32_t* slot = reinterpret_cast<int32_t*>(combine_shared + k);  // [k]
  const int64_t t = blockIdx.x;
  const int32_t* id = ids + t * ldi;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const int e = id[j];
    int rank = 0;
    for (int i = 0; i < k; ++i) rank += id[i] < e || (id[i] == e && i < j);
    weight[rank] = wts[t * ldw + j];
    slot[rank] = slot_of[t * k + j];
  }
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= hidden) return;
  float acc = 0.0f;
  for (int r = 0; r < k; ++r) acc = __fmaf_rn(weight[r], y[static_cast<int64_t>(slot[r]) * hidden + c], acc);
  out[t * ldo + c] = acc;
}

size_t Align(size_t n) { return (n + 255) / 256 * 256; }

// The decode path (one pair per tile, every matrix affine, gate and up
// alike): the one-row kernel over products the sort writes, gate and up in
// one launch. G4_CUDA_MOE_ROW=0 keeps the tiled kernel (for comparison).
bool UseExpertRows(const MoeExpertsArgs& a, int mt, int64_t P) {
  static const bool enabled = EnvSwitchOn("G4_CUDA_MOE_ROW");
  const WeightMatrix &g = a.gate[0], &u = a.up[0], &d = a.down[0];
  return enabled && mt == 1 && 2 * P <= kMaxRowProducts && g.is_affine() && u.is_affine() && d.is_affine() &&
         g.bits == u.bits && g.group_size == u.group_size && g.scale_dtype == u.scale_dtype && g.rows == u.rows &&
         g.cols == u.cols;
}

ExpertRowMatrix RowMatrix(const WeightMatrix& w, float* y, int64_t ldy) {
  const DevWeight d = MakeDevWeight(w);
  return ExpertRowMatrix{y, ldy, d.row_bytes, static_cast<int32_t>(d.rows), d.scale_type, d.row_bytes % 16 == 0};
}

// Rows per pass: the scratch (the pairs' gathered, quantized inputs and their
// gate, up and down outputs, about 8 * (2 Ie + H) floats per row at top-8)
// stays bounded whatever the chunk; a 32768-token chunk of 26b-a4b needed
// about 5 GB at once and ran out beside a full KV pool. Rows are computed
// on their own, so the passes give the bits one pass would.
constexpr int64_t kMoeRowsPerPass = 1024;

void MoeExpertsPass(const MoeExpertsArgs& a, Scratch& scratch, cudaStream_t stream) {
  const int64_t rows = a.x.rows, hidden = a.x.cols, width = a.gate[0].rows;
  const int k = static_cast<int>(a.ids.cols), E = static_cast<int>(a.gate.size());
  const int64_t P = rows * k;
  G4_CHECK_MSG(P < (int64_t{1} << 31) && E <= 4096, "[cuda] MoeExperts: too many pairs or experts");
  for (int e = 1; e < E; ++e) {
    G4_CHECK_MSG(WeightFormat(a.gate[e]) == WeightFormat(a.gate[0]) && WeightFormat(a.up[e]) == WeightFormat(a.up[0]) &&
                     WeightFormat(a.down[e]) == WeightFormat(a.down[0]) &&
                     a.gate[e].group_size == a.gate[0].group_size && a.up[e].group_size == a.up[0].group_size &&
                     a.down[e].group_size == a.down[0].group_size &&
                     a.gate[e].scale_dtype == a.gate[0].scale_dtype && a.up[e].scale_dtype == a.up[0].scale_dtype &&
                     a.down[e].scale_dtype == a.down[0].scale_dtype,
                 "[cuda] MoeExperts: experts of one layer must share their formats");
  }
  // Few pairs per expert: tiles of one pair (decode); else tiles of kMoeTile,
  // or of kMoeMmaTile on the tensor cores when every matrix is affine.
  const bool all_affine = a.gate[0].is_affine() && a.up[0].is_affine() && a.down[0].is_affine();
  const int mt = P <= E ? 1 : all_affine ? kMoeMmaTile : kMoeTile;
  const bool expert_rows = UseExpertRows(a, mt, P);
  const int64_t max_tiles = (P + mt - 1) / mt + E;
  G4_CHECK_MSG(max_tiles <= 65535, "[cuda] MoeExperts: too many expert tiles for one launch");
  const int64_t sx = PermutedStride(hidden), sh = PermutedStride(width);
  // Scratch: the plan, the row products, then float buffers.
  const size_t ints = Align((2 * P + 3 * max_tiles + 1) * sizeof(int32_t));
  const size_t prods = expert_rows ? Align(3 * P * sizeof(RowProduct)) : 0;
  // Permuted inputs only for dense matrices.
  const bool dense_in = !a.gate[0].is_affine() || !a.up[0].is_affine();
  const size_t fl_xp = dense_in ? Align(P * sx * 4) : 0, fl_g = Align(P * width * 4),
               fl_hp = a.down[0].is_affine() ? 0 : Align(P * sh * 4),
               fl_y = Align(P * hidden * 4);
  char* base = static_cast<char*>(scratch.Get(Scratch::kMoe, ints + prods + fl_xp + 2 * fl_g + fl_hp + fl_y));
  int32_t* ip = reinterpret_cast<int32_t*>(base);
  Plan plan;
  plan.order = ip, ip += P;
  plan.slot_of = ip, ip += P;
  plan.tile_expert = ip, ip += max_tiles;
  plan.tile_start = ip, ip += max_tiles;
  plan.tile_count = ip, ip += max_tiles;
  plan.num_tiles = ip;
  char* fl = base + ints + prods;
  float* xp = reinterpret_cast<float*>(fl);
  float* g = reinterpret_cast<float*>(fl + fl_xp);
  float* u = reinterpret_cast<float*>(fl + fl_xp + fl_g);
  float* hp = reinterpret_cast<float*>(fl + fl_xp + 2 * fl_g);
  float* y = reinterpret_cast<float*>(fl + fl_xp + 2 * fl_g + fl_hp);

  const ExpertPtrs* table = ExpertTable(a);
  ExpertRows er;
  if (expert_rows) {
    er.products = reinterpret_cast<RowProduct*>(base + ints);
    er.table = table;
    er.experts = E;
    er.pairs = static_cast<int32_t>(P);
    er.m[0] = RowMatrix(a.gate[0], g, width);
    er.m[1] = RowMatrix(a.up[0], u, width);
    er.m[2] = RowMatrix(a.down[0], y, hidden);
  }
  const int64_t ldi = a.ids.pitch();
  LaunchDependent(SortPairsKernel, dim3(1), dim3(1024), 3 * E * sizeof(int32_t), stream, a.ids.i32(), ldi, rows, k, E,
                  mt, plan, er);
  const int tiles = static_cast<int>(max_tiles);
  const float* x = a.x.f32();
  const int64_t ldx = a.x.pitch();
  const ExpertInputs in_gate = PrepareInputs(a.gate[0], nullptr, x, ldx, nullptr, plan.order, k, P, xp, scratch, stream);
  if (expert_rows) {
    AffineInt8RowMatMulTable(er.products, static_cast<int>(2 * P), 2 * P * width, a.gate[0].bits,
                             a.gate[0].group_size, hidden, er.m[0].scale_type,
                             AllCodesAligned(a.gate, E) && AllCodesAligned(a.up, E), in_gate.qr, stream);
  } else {
    ExpertMatMul(a.gate[0], in_gate, table, E, plan, mt, tiles, g, width, stream);
    const ExpertInputs in_up = PrepareInputs(a.up[0], &in_gate, x, ldx, nullptr, plan.order, k, P, xp, scratch, stream);
    ExpertMatMul(a.up[0], in_up, table + E, E, plan, mt, tiles, u, width, stream);
  }
  // gelu(g) * u: quantized as it is read for an affine down (one launch
  // fewer), else computed into g first.
  const bool gelu_in_place = !a.down[0].is_affine();
  if (gelu_in_place) {
    const int64_t n = P * width;
    GeluMulFlatKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(g, u, n);
    G4_CUDA_LAUNCHED();
  }
  const ExpertInputs in_down =
      PrepareInputs(a.down[0], nullptr, g, width, gelu_in_place ? nullptr : u, nullptr, 1, P, hp, scratch, stream);
  if (expert_rows) {
    AffineInt8RowMatMulTable(er.products + 2 * P, static_cast<int>(P), P * hidden, a.down[0].bits,
                             a.down[0].group_size, width, er.m[2].scale_type, AllCodesAligned(a.down, E), in_down.qr,
                             stream);
  } else {
    ExpertMatMul(a.down[0], in_down, table + 2 * E, E, plan, mt, tiles, y, hidden, stream);
  }
  LaunchDependent(CombineKernel,
                  dim3(static_cast<unsigned>(rows), static_cast<unsigned>((hidden + 255) / 256)), dim3(256),
                  2 * k * sizeof(float), stream, a.ids.i32(), ldi, a.weights.f32(), a.weights.pitch(), k,
                  plan.slot_of, y, hidden, a.out.f32(), a.out.pitch());
}

}  // namespace

void MoeRoute(const TensorView& logits, int top_k, const float* per_expert_scale, const TensorView& ids,
              const TensorView& weights, cudaStream_t stream) {
  const int experts = static_cast<int>(logits.cols);
  const int64_t blocks = (logits.rows + kRouteWarps - 1) / kRouteWarps;
  const int64_t ldl = logits.pitch(), ldi = ids.pitch(), ldw = weights.pitch();
  if (experts <= 128 && top_k <= 32) {
    const auto kernel = experts <= 32   ? RouteRegsKernel<1>
                        : experts <= 64 ? RouteRegsKernel<2>
                                        : RouteRegsKernel<4>;
    LaunchDependent(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kRouteWarps * 32), 0, stream, logits.f32(), ldl,
                    logits.rows, experts, top_k, per_expert_scale, ids.i32(), ldi, weights.f32(), ldw);
    return;
  }
  const size_t smem = static_cast<size_t>(kRouteWarps) * experts * sizeof(float);
  RouteKernel<<<static_cast<unsigned>(blocks), kRouteWarps * 32, smem, stream>>>(
      logits.f32(), ldl, logits.rows, experts, top_k, per_expert_scale, ids.i32(), ldi, weights.f32(), ldw);
  G4_CUDA_LAUNCHED();
}

void MoeExperts(const MoeExpertsArgs& a, Scratch& scratch, cudaStream_t stream) {
  for (int64_t r = 0; r < a.x.rows; r += kMoeRowsPerPass) {  // one pass: the views as given (Rows(0, rows))
    const int64_t n = std::min(kMoeRowsPerPass, a.x.rows - r);
    MoeExpertsArgs part = a;
    part.x = a.x.Rows(r, n);
    part.ids = a.ids.Rows(r, n);
    part.weights = a.weights.Rows(r, n);
    part.out = a.out.Rows(r, n);
    MoeExpertsPass(part, scratch, stream);
  }
}

}  // namespace g4::cuda
