// Ops::PagedAttention on the GPU: split-K flash decoding over the paged
// pool, every record format, GQA, sliding windows reading only the window.
//
// The order of the arithmetic is a function of the row alone (ops.h): a
// row at position p sees keys lo..p (lo = 0, or p - window + 1); they are
// cut at multiples of kSplitKeys into splits, and each split at multiples
// of kTileKeys into tiles. One warp computes one (row, KV head, split,
// group of query heads): scores s = (q . k) * scale with q . k one fma
// chain over head_dim in order; per tile the online softmax (rescale by
// exp(m_old - m_new) when the maximum grows, p = exp(s - m), l += the warp
// butterfly sum of the tile's p), then acc = fma(p, v, acc) in key order. A second kernel merges a
// row's splits in order by log-sum-exp, and for turbo stores applies the
// inverse value rotation once to the merged output. Nothing depends on the
// other rows of the step, so a row's bits are the same in any batch and
// chunked prefill equals decode.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_codec.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/sub_profile.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

constexpr int kSplitKeys = 32;  // one tile: as many warps as possible for a decode row
constexpr int kTileKeys = 32;  // = lanes: one key per lane in the softmax step
constexpr int kThreads = 128;
constexpr size_t kPartialBudget = size_t{512} << 20;  // bytes of split states per launch

struct AttnStore {
  DevKvFormat f;
  const uint8_t* records = nullptr;
  int64_t num_blocks = 0;
  const float* centroids = nullptr;
  const float* signs = nullptr;
};

struct AttnParams {
  const int32_t* positions;
  const int32_t* row_seq;
  const int32_t* kv_len;
  int64_t num_seqs;
  AttnStore store[2];
  const int32_t* table;
  int64_t table_stride;
  const uint8_t* seq_store;
  int block_size;
  const float* q;
  int64_t ldq;
  float* out;
  int64_t ldo;
  int heads, kv_heads, d, group, window;
  float scale;
  int splits_max;
  int64_t row0;
  float* partial;  // [rows][kv_heads][splits_max][state]
};

__device__ __forceinline__ int64_t StateFloats(const AttnParams& a) {
  return static_cast<int64_t>(a.group) * (2 + a.d);
}

struct RowInfo {
  int32_t seq, pos, lo, store;
};

__device__ __forceinline__ RowInfo ReadRow(const AttnParams& a, int64_t r) {
  RowInfo ri;
  ri.seq = a.row_seq[r];
  if (ri.seq < 0 || ri.seq >= a.num_seqs) __trap();
  ri.pos = a.positions[r];
  if (ri.pos < 0 || ri.pos >= a.kv_len[ri.seq]) __trap();
  ri.lo = a.window > 0 ? max(0, ri.pos - a.window + 1) : 0;
  ri.store = a.seq_store ? a.seq_store[ri.seq] : 0;
  if (ri.store != 0 && ri.store != 1) __trap();
  return ri;
}

// The record of key j (positions fit in 32 bits: 32-bit division).
__device__ __forceinline__ const uint8_t* Record(const AttnParams& a, const AttnStore& s, int32_t seq, int32_t j) {
  const int32_t entry = j / a.block_size, slot = j - entry * a.block_size;
  if (entry >= a.table_stride) __trap();
  const int32_t block = a.table[seq * a.table_stride + entry];
  if (block < 0 || block >= s.num_blocks) __trap();  // a visible key in a missing block
  return s.records + (static_cast<int64_t>(block) * a.block_size + slot) * s.f.record_bytes;
}

// Record j of the tile, computed by lane j and broadcast.
__device__ __forceinline__ const uint8_t* TileRecord(const uint8_t* mine, int j) {
  return reinterpret_cast<const uint8_t*>(
      __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(mine), j));
}

// One warp per (row, KV head, split, group of query heads). Per tile of
// keys the warp decodes the tile's keys into shared memory (lanes along
// head_dim, many records in flight), then lane j scores key j against each
// query head of the group (one sequential fma chain over head_dim, queries
// broadcast from shared memory); the online softmax update runs with one
// key per lane; then the tile's values replace the keys in shared memory and
// acc[g][e] (lane l owning e = l, l + 32, ...) = fma(p_j, v_j[e], acc) for
// the tile's keys in order.
template <int D32, int GP>
__global__ __launch_bounds__(32) void SplitKernel(AttnParams a, int head_groups, int group_heads) {
  extern __shared__ float sm[];
  const int lane = threadIdx.x;
  const int64_t r_local = blockIdx.z, r = a.row0 + r_local;
  const int kh = blockIdx.y;
  const int split = blockIdx.x / head_groups, hg = blockIdx.x % head_groups;
  const RowInfo ri = ReadRow(a, r);
  const int64_t my = ri.lo / kSplitKeys + split;
  if (my * kSplitKeys > ri.pos) return;  // the row has fewer splits
  const int64_t k_begin = max(static_cast<int64_t>(ri.lo), my * kSplitKeys);
  const int64_t k_end = min(static_cast<int64_t>(ri.pos) + 1, (my + 1) * kSplitKeys);
  const AttnStore st = ri.store == 0 ? a.store[0] : a.store[1];
  if (st.records == nullptr) __trap();
  const int G = a.group, d = a.d, g0 = hg * group_heads;
  const int gn = min(group_heads, G - g0);
  const int ld = d + 1;           // tile row stride: lanes reading rows hit distinct banks
  float* qs = sm;                 // [GP][d]
  float* tile = sm + GP * d;      // [kTileKeys][ld]

  const float* qrow = a.q + r * a.ldq + (static_cast<int64_t>(kh) * G + g0) * d;
  for (int i = lane; i < GP * d; i += 32) qs[i] = i < gn * d ? qrow[i] : 0.0f;
  float acc[GP][D32], m[GP], l[GP];
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < D32; ++i) acc[g][i] = 0.0f;
  }
  const int64_t head_off = static_cast<int64_t>(kh) * d;
  for (int64_t t0 = k_begin; t0 < k_end;) {
    const int64_t t1 = min(k_end, (t0 / kTileKeys + 1) * kTileKeys);
    const int nt = static_cast<int>(t1 - t0);
    const uint8_t* my_rec = lane < nt ? Record(a, st, ri.seq, static_cast<int32_t>(t0 + lane)) : nullptr;
    __syncwarp();
#pragma unroll 4
    for (int j = 0; j < nt; ++j) {
      const uint8_t* rec = TileRecord(my_rec, j);
      for (int e = lane; e < d; e += 32) tile[j * ld + e] = DecodeKey(st.f, rec, head_off + e);
    }
    __syncwarp();
    float s[GP];
#pragma unroll
    for (int g = 0; g < GP; ++g) s[g] = 0.0f;
    if (lane < nt) {
      const float* kj = tile + lane * ld;
      for (int e = 0; e < d; ++e) {
        const float k = kj[e];
#pragma unroll
        for (int g = 0; g < GP; ++g) s[g] = __fmaf_rn(qs[g * d + e], k, s[g]);
      }
    }
    float p[GP];
#pragma unroll
    for (int g = 0; g < GP; ++g) {
      const float sc = lane < nt ? s[g] * a.scale : -INFINITY;
      const float m_new = fmaxf(m[g], WarpMax(sc));
      if (m_new > m[g]) {
        const float c = expf(m[g] - m_new);  // 0 on the first tile
        l[g] = l[g] * c;
#pragma unroll
        for (int i = 0; i < D32; ++i) acc[g][i] = acc[g][i] * c;
        m[g] = m_new;
      }
      p[g] = lane < nt ? expf(sc - m_new) : 0.0f;
      l[g] = l[g] + WarpSum(p[g]);
    }
    __syncwarp();
#pragma unroll 4
    for (int j = 0; j < nt; ++j) {
      const uint8_t* rec = TileRecord(my_rec, j);
      for (int e = lane; e < d; e += 32) tile[j * ld + e] = DecodeValue(st.f, rec, head_off + e, st.centroids);
    }
    __syncwarp();
    for (int j = 0; j < nt; ++j) {
      float vv[D32];
#pragma unroll
      for (int i = 0; i < D32; ++i) {
        const int e = lane + 32 * i;
        vv[i] = e < d ? tile[j * ld + e] : 0.0f;
      }
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        const float pj = __shfl_sync(0xffffffffu, p[g], j);
#pragma unroll
        for (int i = 0; i < D32; ++i) acc[g][i] = __fmaf_rn(pj, vv[i], acc[g][i]);
      }
    }
    t0 = t1;
  }
  float* out = a.partial + ((r_local * a.kv_heads + kh) * a.splits_max + split) * StateFloats(a);
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    if (g >= gn) continue;
    if (lane == 0) out[g0 + g] = m[g], out[G + g0 + g] = l[g];
#pragma unroll
    for (int i = 0; i < D32; ++i) {
      const int e = lane + 32 * i;
      if (e < d) out[2 * G + static_cast<int64_t>(g0 + g) * d + e] = acc[g][i];
    }
  }
}

template <int D32, int GP>
void LaunchSplit(const dim3& grid, size_t smem, const AttnParams& a, int head_groups, int group_heads,
                 cudaStream_t stream) {
  static size_t allowed = 48 * 1024;  // raised once per new maximum, never inside a capture
  if (smem > allowed) {
    G4_CUDA_CHECK(cudaFuncSetAttribute(SplitKernel<D32, GP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    allowed = smem;
  }
  SplitKernel<D32, GP><<<grid, 32, smem, stream>>>(a, head_groups, group_heads);
}

// One block per (row, query head): merge the row's splits in order.
__global__ __launch_bounds__(kThreads) void MergeKernel(AttnParams a) {
  extern __shared__ float o[];  // [d]
  const int64_t r_local = blockIdx.y, r = a.row0 + r_local;
  const int h = blockIdx.x, G = a.group, d = a.d, kh = h / G, g = h % G;
  const RowInfo ri = ReadRow(a, r);
  const int splits = static_cast<int>(ri.pos / kSplitKeys - ri.lo / kSplitKeys + 1);
  const int64_t state = StateFloats(a);
  const float* base = a.partial + (r_local * a.kv_heads + kh) * a.splits_max * state;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, base[s * state + g]);
  float l = 0.0f;
  for (int e = threadIdx.x; e < d; e += blockDim.x) o[e] = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float ms = base[s * state + g];
    if (ms == -INFINITY) continue;
    const float c = expf(ms - mx);
    l = l + base[s * state + G + g] * c;
    const float* as = base + s * state + 2 * G + static_cast<int64_t>(g) * d;
    for (int e = threadIdx.x; e < d; e += blockDim.x) o[e] = __fmaf_rn(c, as[e], o[e]);
  }
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  for (int e = threadIdx.x; e < d; e += blockDim.x) o[e] = o[e] * inv;
  __syncthreads();
  const AttnStore& st = a.store[ri.store];
  if (st.f.kind == kKvTurbo) {  // kvfmt::RotateInverse on the merged row
    for (int hh = 1; hh < d; hh *= 2) {
      for (int p = threadIdx.x; p < d / 2; p += blockDim.x) {
        const int i = (p / hh) * 2 * hh + p % hh, j = i + hh;
        const float x = o[i], y = o[j];
        o[i] = x + y;
        o[j] = x - y;
      }
      __syncthreads();
    }
    const float sc = 1.0f / sqrtf(static_cast<float>(d));
    for (int e = threadIdx.x; e < d; e += blockDim.x) o[e] = o[e] * (sc * st.signs[e]);
    __syncthreads();
  }
  float* out = a.out + r * a.ldo + static_cast<int64_t>(h) * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) out[e] = o[e];
}

AttnStore MakeAttnStore(const PagedKvStore& s) {
  AttnStore d;
  if (!s.records) return d;
  d.f = MakeDevKvFormat(s.format);
  d.records = s.records;
  d.num_blocks = s.num_blocks;
  d.centroids = s.value_centroids;
  d.signs = s.value_signs;
  return d;
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& args, Scratch& scratch, cudaStream_t stream) {
  AttnParams a{};
  a.positions = args.rows.positions;
  a.row_seq = args.rows.row_seq;
  a.kv_len = args.rows.kv_len;
  a.num_seqs = args.rows.num_seqs;
  a.store[0] = MakeAttnStore(args.kv.store[0]);
  a.store[1] = MakeAttnStore(args.kv.store[1]);
  a.table = args.kv.tables.block_table;
  a.table_stride = args.kv.tables.table_stride;
  a.seq_store = args.kv.tables.seq_store;
  a.block_size = args.kv.block_size;
  a.q = args.q.f32();
  a.ldq = args.q.rows > 1 ? args.q.stride : args.q.cols;
  a.out = args.out.f32();
  a.ldo = args.out.rows > 1 ? args.out.stride : args.out.cols;
  a.heads = args.num_heads;
  a.kv_heads = args.num_kv_heads;
  a.d = args.head_dim;
  a.group = args.num_heads / args.num_kv_heads;
  a.window = args.window;
  a.scale = args.scale;
  const int64_t max_len = std::max<int64_t>(args.rows.max_kv_len, 1);
  int64_t splits = (max_len + kSplitKeys - 1) / kSplitKeys;
  if (args.window > 0) splits = std::min<int64_t>(splits, (args.window + kSplitKeys - 1) / kSplitKeys + 1);
  a.splits_max = static_cast<int>(splits);
  G4_CHECK_MSG(splits <= 65535 && args.num_kv_heads <= 65535 && args.num_heads <= 65535,
               "[cuda] PagedAttention: launch too large");

  const size_t state_bytes = static_cast<size_t>(a.group) * (2 + a.d) * sizeof(float);
  const size_t per_row = state_bytes * a.kv_heads * a.splits_max;
  const int64_t group_rows = std::clamp<int64_t>(static_cast<int64_t>(kPartialBudget / per_row), 1, 65535);
  const int64_t rows = args.rows.num_rows;
  {
    SubProfile sp(stream, "attention scratch");
    a.partial = static_cast<float*>(scratch.Get(Scratch::kAttention, per_row * std::min(group_rows, rows)));
  }

  // Query heads per warp: as many as keep q and acc within 32 registers each.
  const int d32 = (a.d + 31) / 32;
  G4_CHECK_MSG(d32 <= 16, "[cuda] PagedAttention: head_dim above 512");
  const int D32 = d32 <= 1 ? 1 : d32 <= 2 ? 2 : d32 <= 4 ? 4 : d32 <= 8 ? 8 : 16;
  const int GP = std::min(16, 32 / D32);
  const int group_heads = std::min(GP, a.group);
  const int head_groups = (a.group + group_heads - 1) / group_heads;
  G4_CHECK_MSG(static_cast<int64_t>(a.splits_max) * head_groups <= (int64_t{1} << 31) - 1,
               "[cuda] PagedAttention: launch too large");
  const size_t merge_smem = static_cast<size_t>(a.d) * sizeof(float);
  for (int64_t r0 = 0; r0 < rows; r0 += group_rows) {
    const int64_t n = std::min(group_rows, rows - r0);
    a.row0 = r0;
    const dim3 grid(static_cast<unsigned>(a.splits_max * head_groups), a.kv_heads, static_cast<unsigned>(n));
    {
    SubProfile sp_split(stream, rows == 1 ? "attention split (1 row)" : "attention split");
    const size_t smem = (static_cast<size_t>(GP) * a.d + static_cast<size_t>(kTileKeys) * (a.d + 1)) * sizeof(float);
    switch (D32) {
      case 1: LaunchSplit<1, 16>(grid, smem, a, head_groups, group_heads, stream); break;
      case 2: LaunchSplit<2, 16>(grid, smem, a, head_groups, group_heads, stream); break;
      case 4: LaunchSplit<4, 8>(grid, smem, a, head_groups, group_heads, stream); break;
      case 8: LaunchSplit<8, 4>(grid, smem, a, head_groups, group_heads, stream); break;
      default: LaunchSplit<16, 2>(grid, smem, a, head_groups, group_heads, stream); break;
    }
    G4_CUDA_LAUNCHED();
    }
    SubProfile sp_merge(stream, rows == 1 ? "attention merge (1 row)" : "attention merge");
    MergeKernel<<<dim3(a.heads, static_cast<unsigned>(n)), kThreads, merge_smem, stream>>>(a);
    G4_CUDA_LAUNCHED();
  }
}

}  // namespace g4::cuda
