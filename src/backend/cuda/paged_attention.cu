// Ops::PagedAttention on the GPU: split-K flash decoding over the paged
// pool, every record format, GQA, sliding windows reading only the window.
//
// The order of the arithmetic is a function of the row alone (ops.h): a
// row at position p sees keys lo..p (lo = 0, or p - window + 1); they are
// cut at multiples of kSplitKeys into splits, and each split at multiples
// of the tile size (TileKeys(head_dim)) into tiles. One block computes one
// (row, KV head, split): the query heads of the KV head's group share each
// decoded key and value; per tile, scores s = (q . k) * scale (q . k one
// sequential fma chain over head_dim), online softmax (rescale by
// exp(m_old - m_new) when the maximum grows, p = exp(s - m), l += the p's in
// key order), acc = fma(p, v, acc) in key order. A second kernel merges a
// row's splits in order by log-sum-exp, and for turbo stores applies the
// inverse value rotation once to the merged output. Nothing depends on the
// other rows of the step, so a row's bits are the same in any batch and
// chunked prefill equals decode.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_codec.cuh"
#include "backend/cuda/launch.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

constexpr int kSplitKeys = 128;
constexpr int kThreads = 128;
constexpr size_t kPartialBudget = size_t{512} << 20;  // bytes of split states per launch

int TileKeys(int head_dim) { return std::clamp(4096 / std::max(head_dim, 1), 8, 64); }

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
  int heads, kv_heads, d, group, window, tile;
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

__device__ __forceinline__ const uint8_t* Record(const AttnParams& a, const AttnStore& s, int32_t seq, int64_t j) {
  const int64_t entry = j / a.block_size;
  if (entry >= a.table_stride) __trap();
  const int32_t block = a.table[seq * a.table_stride + entry];
  if (block < 0 || block >= s.num_blocks) __trap();  // a visible key in a missing block
  return s.records + (static_cast<int64_t>(block) * a.block_size + j % a.block_size) * s.f.record_bytes;
}

__global__ __launch_bounds__(kThreads) void SplitKernel(AttnParams a) {
  extern __shared__ float sm[];
  const int G = a.group, d = a.d, TK = a.tile;
  float* qs = sm;               // [G][d]
  float* acc = qs + G * d;      // [G][d]
  float* tile = acc + G * d;    // [TK][d]
  float* sc = tile + TK * d;    // [G][TK]
  float* m = sc + G * TK;       // [G]
  float* l = m + G;             // [G]
  float* cf = l + G;            // [G]: this tile's rescale factor, or 1

  const int64_t r_local = blockIdx.z, r = a.row0 + r_local;
  const int kh = blockIdx.y, split = blockIdx.x;
  const RowInfo ri = ReadRow(a, r);
  const int64_t my = ri.lo / kSplitKeys + split;
  if (my * kSplitKeys > ri.pos) return;  // the row has fewer splits
  const int64_t k_begin = max(static_cast<int64_t>(ri.lo), my * kSplitKeys);
  const int64_t k_end = min(static_cast<int64_t>(ri.pos) + 1, (my + 1) * kSplitKeys);
  const AttnStore& st = a.store[ri.store];
  if (st.records == nullptr) __trap();

  const float* qrow = a.q + r * a.ldq + static_cast<int64_t>(kh) * G * d;
  for (int e = threadIdx.x; e < G * d; e += blockDim.x) {
    qs[e] = qrow[e];
    acc[e] = 0.0f;
  }
  for (int g = threadIdx.x; g < G; g += blockDim.x) m[g] = -INFINITY, l[g] = 0.0f;
  __syncthreads();

  const int64_t head_off = static_cast<int64_t>(kh) * d;
  for (int64_t t0 = k_begin; t0 < k_end;) {
    const int64_t t1 = min(k_end, (t0 / TK + 1) * TK);
    const int nt = static_cast<int>(t1 - t0);
    for (int i = threadIdx.x; i < nt * d; i += blockDim.x) {
      const int jj = i / d, e = i % d;
      tile[i] = DecodeKey(st.f, Record(a, st, ri.seq, t0 + jj), head_off + e);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * nt; i += blockDim.x) {
      const int g = i / nt, jj = i % nt;
      const float* qg = qs + g * d;
      const float* kj = tile + jj * d;
      float s = 0.0f;
      for (int e = 0; e < d; ++e) s = __fmaf_rn(qg[e], kj[e], s);
      sc[g * TK + jj] = s * a.scale;
    }
    __syncthreads();
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
      float* s = sc + g * TK;
      float tmax = -INFINITY;
      for (int jj = 0; jj < nt; ++jj) tmax = fmaxf(tmax, s[jj]);
      const float m_new = fmaxf(m[g], tmax);
      float c = 1.0f;
      if (m_new > m[g]) {
        c = expf(m[g] - m_new);  // 0 on the first tile
        l[g] = l[g] * c;
        m[g] = m_new;
      }
      cf[g] = c;
      float add = 0.0f;
      for (int jj = 0; jj < nt; ++jj) {
        s[jj] = expf(s[jj] - m_new);
        add = add + s[jj];
      }
      l[g] = l[g] + add;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nt * d; i += blockDim.x) {
      const int jj = i / d, e = i % d;
      tile[i] = DecodeValue(st.f, Record(a, st, ri.seq, t0 + jj), head_off + e, st.centroids);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * d; i += blockDim.x) {
      const int g = i / d, e = i % d;
      float v = acc[i];
      if (cf[g] != 1.0f) v = v * cf[g];
      const float* p = sc + g * TK;
      for (int jj = 0; jj < nt; ++jj) v = __fmaf_rn(p[jj], tile[jj * d + e], v);
      acc[i] = v;
    }
    __syncthreads();
    t0 = t1;
  }
  float* out = a.partial + ((r_local * a.kv_heads + kh) * a.splits_max + split) * StateFloats(a);
  for (int g = threadIdx.x; g < G; g += blockDim.x) out[g] = m[g], out[G + g] = l[g];
  for (int e = threadIdx.x; e < G * d; e += blockDim.x) out[2 * G + e] = acc[e];
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
  a.tile = TileKeys(args.head_dim);
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
  a.partial = static_cast<float*>(scratch.Get(Scratch::kAttention, per_row * std::min(group_rows, rows)));

  const size_t smem = (2 * static_cast<size_t>(a.group) * a.d + static_cast<size_t>(a.tile) * a.d +
                       static_cast<size_t>(a.group) * a.tile + 3 * static_cast<size_t>(a.group)) *
                      sizeof(float);
  G4_CHECK_MSG(smem <= 220 * 1024, "[cuda] PagedAttention: head group too large for shared memory");
  if (smem > 48 * 1024)
    G4_CUDA_CHECK(cudaFuncSetAttribute(SplitKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const size_t merge_smem = static_cast<size_t>(a.d) * sizeof(float);
  for (int64_t r0 = 0; r0 < rows; r0 += group_rows) {
    const int64_t n = std::min(group_rows, rows - r0);
    a.row0 = r0;
    SplitKernel<<<dim3(a.splits_max, a.kv_heads, static_cast<unsigned>(n)), kThreads, smem, stream>>>(a);
    G4_CUDA_LAUNCHED();
    MergeKernel<<<dim3(a.heads, static_cast<unsigned>(n)), kThreads, merge_smem, stream>>>(a);
    G4_CUDA_LAUNCHED();
  }
}

}  // namespace g4::cuda
