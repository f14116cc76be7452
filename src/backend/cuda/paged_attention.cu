// Ops::PagedAttention on the GPU: split-K flash decoding over the paged
// pool, every record format, GQA, sliding windows reading only the window.
//
// The order of the arithmetic is a function of the row alone (ops.h): a
// row at position p sees keys lo..p (lo = 0, or p - window + 1); they are
// cut at multiples of kSplitKeys (64) into splits. One block of 8 warps
// computes one (row, KV head, split, group of query heads), each warp 8 of
// the split's keys, each lane a slice of head_dim: scores s = (q . k) *
// scale with q . k the lane's fma chain over its slice then the warp
// butterfly; the split's softmax (m = max, p = exp(s - m), l = butterfly sum
// of the pairs p_j + p_{j+32}); acc = fma(p, v, acc) over a warp's keys in
// order, the 8 warps' sums added in warp order. A second kernel merges a
// row's splits in order by log-sum-exp, and for turbo stores applies the
// inverse value rotation once to the merged output. Nothing depends on the
// other rows of the step, so a row's bits are the same in any batch and
// chunked prefill equals decode. The split size is fixed (never a function
// of the batch), and at batch 1 gives splits x KV heads blocks.
//
// Sequences with many rows in the step (prefill runs: kTiledMinRowsDefault
// or more) have their split states computed by the query-tiled kernel of
// paged_attention_tiled.cu instead, in the same operations and order: it
// reads a split's keys once per tile of rows rather than once per row. The
// split kernel then skips those rows; the merge is common.
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "backend/cuda/attention_last_merge.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/kv_codec.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/paged_attention_core.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quantize_group.cuh"
#include "backend/cuda/sub_profile.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

using namespace attn;  // NOLINT: the shared pieces (paged_attention_core.cuh)

constexpr int kThreads = 128;                         // merge block
constexpr size_t kPartialBudget = size_t{512} << 20;  // bytes of split states per launch

// One block of kWarps warps per (row, KV head, split, group of up to GP
// query heads); warp w owns the split's keys w * kKeysPerWarp ..; lane l
// owns head elements l * D32 .. l * D32 + D32 - 1 (q in registers).
//  1. scores: per key, each lane's fma chain over its elements, then the
//     warp butterfly (WarpSum), times the scale, into shared memory;
//  2. per query head (one warp each): the split's maximum m, p_j =
//     exp(s_j - m) in place, l = butterfly sum of (p_j + p_{j+32});
//  3. values: acc = fma(p_j, v_j, acc) over the warp's keys in order, then
//     the warps' sums added in warp order.
// Every step's order is fixed by the row alone.
template <int D32, int GP>
__global__ __launch_bounds__(kWarps * 32, GP == 1 ? 1 : 2) void SplitKernel(AttnParams a, int head_groups,
                                                                        int group_heads) {
  // Keys loaded at once: a narrow block 8 (4 at head_dim 512); a grouped
  // one, whose q and acc hold GP heads, at most 32 floats of them, so that
  // it fits 128 registers (two blocks per SM) without spilling.
  constexpr int KB = GP == 1 ? (D32 <= 8 ? kKeysPerWarp : kKeysPerWarp / 2) : std::min(32 / D32, kKeysPerWarp);
  float* sm = reinterpret_cast<float*>(DynamicShared());
  float* sc = sm;                       // [GP][kSplitKeys] scores, then p
  float* stats = sc + GP * kSplitKeys;  // [2][GP]: m, l
  float* red = stats + 2 * GP;          // [kWarps][GP][32 * D32]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r_local = blockIdx.z, r = a.row0 + r_local;
  const int kh = blockIdx.y;
  const int split = blockIdx.x / head_groups, hg = blockIdx.x % head_groups;
  RowInfo ri;
  int64_t k_begin;
  int nk;
  if (!BlockSplitKeys(a, r, split, ri, k_begin, nk)) return;
  const AttnStore st = ri.store == 0 ? a.store[0] : a.store[1];
  if (st.records == nullptr) __trap();
  const int G = a.group, d = a.d, g0 = hg * group_heads;
  const int gn = min(group_heads, G - g0);
  const int e0 = lane * D32;
  const int valid = max(0, min(D32, d - e0));
  const int64_t base = static_cast<int64_t>(kh) * d + e0;

  const int j0 = warp * kKeysPerWarp;  // the warp's first key in the split
  const uint8_t* my_rec = lane < kKeysPerWarp && j0 + lane < nk
                              ? Record(a, st, ri.seq, static_cast<int32_t>(k_begin + j0 + lane))
                              : nullptr;
  if (st.vec && my_rec != nullptr) {  // the key's value slice into L2 now: phase 3 reads it after the softmax
    const uint8_t* v = my_rec + st.f.v_codes + static_cast<int64_t>(kh) * d * st.f.plain_bytes;
    for (int off = 0; off < d * st.f.plain_bytes; off += 128) PrefetchL2(v + off);
  }
  // Up to here the kernel read only the step's uploaded arrays (rows, block
  // tables); q and the records are written by this step's kernels.
  FollowPredecessor();  // launched as a dependent (pdl.cuh)

  float q[GP][D32];
  LoadSplitQ<D32, GP>(a, r, kh, g0, gn, e0, valid, q);

  // 1. scores
#pragma unroll
  for (int jb = 0; jb < kKeysPerWarp; jb += KB) {
    float kv[KB][D32];
#pragma unroll
    for (int jj = 0; jj < KB; ++jj) {
      const uint8_t* rec = TileRecord(my_rec, jb + jj);
      if (rec != nullptr) {
        LoadSlice<D32>(st, rec, base, valid, false, kv[jj]);
      } else {
#pragma unroll
        for (int i = 0; i < D32; ++i) kv[jj][i] = 0.0f;
      }
    }
#pragma unroll
    for (int jj = 0; jj < KB; ++jj)
      StoreKeyScores<D32, GP>(q, kv[jj], a.scale, j0 + jb + jj < nk, j0 + jb + jj, lane, sc);
  }
  __syncthreads();
  // 2. softmax statistics of the split, one warp per query head
  SplitSoftmaxStats<GP>(sc, stats, nk, warp, lane);
  __syncthreads();
  // 3. values
  float acc[GP][D32];
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) acc[g][i] = 0.0f;
#pragma unroll
  for (int jb = 0; jb < kKeysPerWarp; jb += KB) {
    float vv[KB][D32];
#pragma unroll
    for (int jj = 0; jj < KB; ++jj) {
      const uint8_t* rec = TileRecord(my_rec, jb + jj);
      if (rec != nullptr) {
        LoadSlice<D32>(st, rec, base, valid, true, vv[jj]);
      } else {
#pragma unroll
        for (int i = 0; i < D32; ++i) vv[jj][i] = 0.0f;
      }
    }
#pragma unroll
    for (int jj = 0; jj < KB; ++jj) {
      if (j0 + jb + jj >= nk) break;
      AccumulateValue<D32, GP>(sc, j0 + jb + jj, vv[jj], acc);
    }
  }
  StoreSplitState<D32, GP>(a, r_local, kh, split, g0, gn, acc, stats, red, warp, lane);
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
  LaunchDependent(SplitKernel<D32, GP>, grid, dim3(kWarps * 32), smem, stream, a, head_groups, group_heads);
}

// The split kernel's instance for D32: one query head per block (narrow)
// or WideHeads.
template <int D32>
auto SplitLauncher(bool narrow) {
  return narrow ? LaunchSplit<D32, 1> : LaunchSplit<D32, WideHeads(D32)>;
}

// The merge block's chunk of kThreads output elements (thread t's value v,
// at column c0 + t of row r; the chunk whole weight groups, as the host
// ensures), quantized into a.quant for the next product: through shared
// memory, the block's warps taking the chunk's groups in turn with
// QuantizeGroup, so the bits are QuantizeRows' on the output row.
__device__ __forceinline__ void QuantizeChunk(const AttnParams& a, int64_t r, int64_t c0, float v) {
  __shared__ float chunk[kThreads];
  chunk[threadIdx.x] = v;
  __syncthreads();
  const int G = a.quant_group, lane = threadIdx.x & 31;
  const QRows& qr = a.quant;
  for (int j = threadIdx.x >> 5; j < kThreads / G; j += kThreads / 32) {
    const int64_t g = c0 / G + j;
    QuantizeGroup(chunk + j * G, nullptr, G, a.quant_bits, g, lane, qr.q + r * qr.ldq, qr.d + r * qr.ldg + g,
                  qr.xs + r * qr.ldg + g);
  }
}

// Merges a row's splits in order, for one query head: out = (sum over
// splits of exp(m_s - max) acc_s) / (sum of exp(m_s - max) l_s). One block
// per (row, query head, chunk of kPer * kThreads elements), `chunks` per
// head: at batch 1 a launch of one block per head has only `heads` blocks,
// each walking all of a row's splits (512 at 32k context) as a chain of
// memory waits, so plain stores take chunks of 128 elements (kPer 1; 2-4
// blocks per head) and each block requests kBatch splits' states at once.
// TurboQuant rows need the whole merged row for the inverse rotation:
// either one chunk of up to 512 elements (kPer 4), or, for rows of many
// splits (a.rotate_count set), chunks of 128 whose blocks write their
// merged elements and count themselves, and the block of the row's head
// that arrives last reads the whole row back through L2 and rotates it. The
// maximum is taken by all threads at once. Every element's sequence over
// the splits is the same in every shape, and the rotation's input the same
// floats, so the choice moves no bit.
template <int kPer, int kBatch>
__global__ __launch_bounds__(kThreads) void MergeKernel(AttnParams a, int chunks) {
  float* o = reinterpret_cast<float*>(DynamicShared());  // [d], turbo only
  __shared__ float warp_max[kThreads / 32];
  const int64_t r_local = blockIdx.y, r = a.row0 + r_local;
  const int h = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int G = a.group, d = a.d, kh = h / G, g = h % G;
  const int e0 = chunk * kPer * kThreads;  // the chunk's first element
  const RowInfo ri = ReadRow(a, r);        // the step's uploaded arrays: before the wait
  const AttnStore& st = a.store[ri.store];
  const bool turbo = st.f.kind == kKvTurbo;
  // The rotation needs the whole row: in one block, or counted chunks.
  if (turbo && kPer * kThreads * chunks < d) __trap();
  if (turbo && chunks > 1 && a.rotate_count == nullptr) __trap();
  FollowPredecessor();                         // the split states are this step's (pdl.cuh)
  const int splits = static_cast<int>(ri.pos / kSplitKeys - ri.lo / kSplitKeys + 1);
  const int64_t state = StateFloats(a);
  const float* base = a.partial + (r_local * a.kv_heads + kh) * a.splits_max * state;
  // The largest split maximum. fmaxf ignores NaN, so in any order it gives
  // the largest non-NaN value (-inf when none): the value of the in-order
  // fold from -inf (no split maximum is -0: scores are sums from +0 times a
  // positive scale).
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += kThreads) mx = fmaxf(mx, base[s * state + g]);
  mx = WarpMax(mx);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = mx;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) mx = fmaxf(mx, warp_max[w]);
  // Thread t owns elements e0 + t, e0 + t + kThreads, ... in registers;
  // each batch's loads are issued before its arithmetic, which runs the
  // splits in order.
  float l = 0.0f, acc[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) acc[k] = 0.0f;
  for (int s0 = 0; s0 < splits; s0 += kBatch) {
    float ms[kBatch], ls[kBatch], av[kBatch][kPer];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const bool in = s0 + b < splits;
      const float* ss = base + static_cast<int64_t>(in ? s0 + b : 0) * state;
      ms[b] = in ? ss[g] : -INFINITY;
      ls[b] = in ? ss[G + g] : 0.0f;
      const float* as = ss + 2 * G + static_cast<int64_t>(g) * d;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int e = e0 + threadIdx.x + k * kThreads;
        av[b][k] = in && e < d ? as[e] : 0.0f;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (ms[b] == -INFINITY) continue;  // past the splits, or a split with no visible key
      const float c = expf(ms[b] - mx);
      l = l + ls[b] * c;
#pragma unroll
      for (int k = 0; k < kPer; ++k) acc[k] = __fmaf_rn(c, av[b][k], acc[k]);
    }
  }
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  float* out = a.out + r * a.ldo + static_cast<int64_t>(h) * d;
  if (!turbo) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int e = e0 + threadIdx.x + k * kThreads;
      if (e < d) out[e] = acc[k] * inv;
    }
    if constexpr (kPer == 1) {
      if (a.quant.q != nullptr) QuantizeChunk(a, r, h * d + e0, acc[0] * inv);
    }
    return;
  }
  // kvfmt::RotateInverse on the merged row, in o.
  if (chunks == 1) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int e = threadIdx.x + k * kThreads;
      if (e < d) o[e] = acc[k] * inv;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int e = e0 + threadIdx.x + k * kThreads;
      if (e < d) out[e] = acc[k] * inv;
    }
    __shared__ int last;
    int* count = a.rotate_count + r_local * a.heads + h;
    __threadfence();  // this thread's stores, before the block counts itself
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(count, 1) == chunks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();  // every other chunk's block counted itself after its stores
    for (int e = threadIdx.x; e < d; e += kThreads) o[e] = __ldcg(out + e);
    if (threadIdx.x == 0) *count = 0;  // zeros for the next launch
  }
  __syncthreads();
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
  for (int e = threadIdx.x; e < d; e += blockDim.x) out[e] = o[e];
}

// Fewest splits of a row for TurboQuant rows to be merged in chunks of
// 128 elements, the last chunk's block rotating the row (a whole-row block
// walks its splits as one chain of waits: at 32k context, 512 of them);
// below, one block per head. G4_CUDA_ATTN_TURBO_CHUNKS moves it (0: never;
// measuring switch). Read at every call, so tests can switch it.
int TurboChunkedSplits() {
  constexpr int kDefault = 32;
  const char* e = std::getenv("G4_CUDA_ATTN_TURBO_CHUNKS");
  if (e == nullptr || *e == '\0') return kDefault;
  const int n = std::atoi(e);
  return n <= 0 ? std::numeric_limits<int>::max() : n;
}

// Most splits a row may have for the tensor-core row kernel to merge them
// itself: none unless G4_CUDA_ATTN_LAST_MERGE says otherwise (0: never; 1:
// 16, a sliding layer's window, a global layer up to 1024 keys; N > 1: up to
// N, at most kLastMergeMaxSplits). Off by default: on an H100 (2026-12-06)
// it made batch-1 decode at 512 slower, e4b 301.8 -> 295.0 tok/s, 12b
// 210.1 -> 202.0. Read at every call, so tests can switch it.
int LastMergeSplits() {
  constexpr int kWhenOn = 16;
  const char* e = std::getenv("G4_CUDA_ATTN_LAST_MERGE");
  if (e == nullptr || *e == '\0') return 0;
  const int n = std::atoi(e);
  return n == 1 ? kWhenOn : std::clamp(n, 0, kLastMergeMaxSplits);
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

bool PagedAttention(const PagedAttentionArgs& args, Scratch& scratch, cudaStream_t stream) {
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
  a.ldq = args.q.pitch();
  a.out = args.out.f32();
  a.ldo = args.out.pitch();
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

  // Query heads per block: as many as keep q and acc within 32 registers
  // each, so they share the block's K/V loads; one per block when that
  // leaves too few blocks to fill the GPU (a decode step of a few rows: at
  // batch 1 on e4b, 18 blocks of a ~20 us serial chain each). A head's
  // operations and their order are the same either way: the choice moves
  // no bit, so it may depend on the step.
  const int d32 = (a.d + 31) / 32;
  G4_CHECK_MSG(d32 <= 16, "[cuda] PagedAttention: head_dim above 512");
  const int D32 = d32 <= 1 ? 1 : d32 <= 2 ? 2 : d32 <= 4 ? 4 : d32 <= 8 ? 8 : 16;
  const int wide = WideHeads(D32);
  const bool narrow =
      static_cast<int64_t>(a.splits_max) * a.kv_heads * rows * ((a.group + wide - 1) / wide) < 2 * SmCount();
  const int GP = narrow ? 1 : wide;
  const int group_heads = std::min(GP, a.group);
  const int head_groups = (a.group + group_heads - 1) / group_heads;
  G4_CHECK_MSG(static_cast<int64_t>(a.splits_max) * head_groups <= (int64_t{1} << 31) - 1,
               "[cuda] PagedAttention: launch too large");
  for (AttnStore& st : a.store) {
    const DevKvFormat& f = st.f;
    st.vec = st.records != nullptr && f.kind == kKvPlain && a.d == 32 * D32 && f.record_bytes % 16 == 0 &&
             f.k_codes % 16 == 0 && f.v_codes % 16 == 0 && reinterpret_cast<uintptr_t>(st.records) % 16 == 0;
  }
  // Stores the tensor-core kernels take (a function of the store's format
  // and head_dim alone); when every store in use is one, the CUDA-core
  // split-state kernels are not launched.
  const bool mma_on = MmaModeOn();
  bool any_mma = false, all_mma = true;
  for (AttnStore& st : a.store) {
    st.mma = mma_on && MmaStorable(st, a.d);
    any_mma = any_mma || st.mma;
    all_mma = all_mma && (st.records == nullptr || st.mma);
  }
  // The merge: chunks of 128 elements, unless a store in use is TurboQuant
  // and the rows have few splits (then one block per head).
  bool any_turbo = false;
  for (const AttnStore& st : a.store) any_turbo = any_turbo || (st.records != nullptr && st.f.kind == kKvTurbo);
  const bool turbo_whole = any_turbo && a.splits_max < TurboChunkedSplits();
  const int merge_chunks = turbo_whole ? 1 : (a.d + kThreads - 1) / kThreads;
  const size_t merge_smem = any_turbo ? static_cast<size_t>(a.d) * sizeof(float) : 0;
  const auto launch_split = D32 == 1   ? SplitLauncher<1>(narrow)
                            : D32 == 2 ? SplitLauncher<2>(narrow)
                            : D32 == 4 ? SplitLauncher<4>(narrow)
                            : D32 == 8 ? SplitLauncher<8>(narrow)
                                       : SplitLauncher<16>(narrow);
  const size_t split_smem =
      (static_cast<size_t>(GP) * kSplitKeys + 2 * GP + static_cast<size_t>(kWarps) * GP * 32 * D32) *
      sizeof(float);
  // Sequences of tiled_min rows or more (prefill runs) take the query-tiled
  // kernel; the split kernel runs too unless the step is one such sequence.
  const int tiled_min = args.rows.query_start != nullptr ? TiledMinRows() : 0;
  const bool tiled = !all_mma && tiled_min > 0 && args.rows.max_query_rows >= tiled_min;
  const bool split = !all_mma && (!tiled || args.rows.num_seqs > 1 || rows < tiled_min);
  // The tensor-core run kernel where a sequence has a prefill run's rows.
  const bool mma_runs = args.rows.max_query_rows >= kTiledMinRowsDefault;
  // The tensor-core row kernel merges the splits itself when they are few
  // (attention_last_merge.cuh: MergeKernel's bits, without its launch);
  // at long context the merge kernel's many blocks share the work.
  const bool last_merge = any_mma && all_mma && !any_turbo && !mma_runs && a.splits_max <= LastMergeSplits();
  if (last_merge) {
    SubProfile sp(stream, "attention scratch");
    a.merge_count = static_cast<int*>(scratch.Get(
        Scratch::kCounters, sizeof(int) * static_cast<size_t>(std::min(group_rows, rows)) * a.kv_heads * a.group));
  }
  // The next product's input, quantized by the merge (QuantizeChunk) where
  // the merge kernel writes every output row in chunks of whole weight
  // groups: plain stores, no merge in the row kernel, head_dim a multiple
  // of the chunk.
  const WeightMatrix* w = args.next_product;
  const int64_t width = static_cast<int64_t>(a.heads) * a.d;
  const bool quantize = w && w->is_affine() && w->cols == width && !any_turbo && !last_merge && a.d % kThreads == 0 &&
                        kThreads % w->group_size == 0;
  if (quantize) {
    a.quant = QRowsIn(scratch.Get(Scratch::kQuant, QRowsBytes(rows, width, w->group_size)), rows, width,
                      w->group_size);
    a.quant_group = w->group_size;
    a.quant_bits = w->bits;
  }
  if (any_turbo && merge_chunks > 1) {
    SubProfile sp(stream, "attention scratch");
    a.rotate_count = static_cast<int*>(scratch.Get(
        Scratch::kCounters, sizeof(int) * static_cast<size_t>(std::min(group_rows, rows)) * a.heads));
  }
  a.query_start = args.rows.query_start;
  a.tiled_min_rows = tiled ? tiled_min : 0;
  a.max_kv_len = max_len;
  a.q_vec = a.d == 32 * D32 && a.ldq % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  a.state_vec = a.d % 4 == 0 && a.group % 2 == 0 && reinterpret_cast<uintptr_t>(a.partial) % 16 == 0;
  // The streaming kernel, where it fits, computes the split kernel's states
  // bit for bit: the choice moves no bit.
  const int stream_layout = StreamLayoutFor(a, D32, StreamMode());
  const bool stream_split = stream_layout != kStreamNone;
  for (int64_t r0 = 0; r0 < rows; r0 += group_rows) {
    const int64_t n = std::min(group_rows, rows - r0);
    a.row0 = r0;
    if (tiled) {
      SubProfile sp_tiled(stream, "attention tiled");
      LaunchTiled(a, D32, n, stream);
      G4_CUDA_LAUNCHED();
    }
    if (split) {
      const dim3 grid(static_cast<unsigned>(a.splits_max * head_groups), a.kv_heads, static_cast<unsigned>(n));
      if (stream_split) {
        SubProfile sp_split(stream, rows == 1 ? "attention stream (1 row)" : "attention stream");
        LaunchStreamSplit(a, D32, stream_layout, narrow, grid, head_groups, group_heads, stream);
      } else {
        SubProfile sp_split(stream, rows == 1 ? "attention split (1 row)" : "attention split");
        launch_split(grid, split_smem, a, head_groups, group_heads, stream);
      }
      G4_CUDA_LAUNCHED();
    }
    if (any_mma) {
      SubProfile sp_mma(stream, mma_runs ? "attention mma runs" : "attention mma rows");
      LaunchMma(a, mma_runs, n, stream);
      G4_CUDA_LAUNCHED();
    }
    if (last_merge) continue;
    SubProfile sp_merge(stream, rows == 1 ? "attention merge (1 row)" : "attention merge");
    const dim3 merge_grid(static_cast<unsigned>(a.heads * merge_chunks), static_cast<unsigned>(n));
    if (turbo_whole) {
      LaunchDependent(MergeKernel<4, 16>, merge_grid, dim3(kThreads), merge_smem, stream, a, merge_chunks);
    } else {
      LaunchDependent(MergeKernel<1, 32>, merge_grid, dim3(kThreads), merge_smem, stream, a, merge_chunks);
    }
    G4_CUDA_LAUNCHED();
  }
  return quantize;
}

}  // namespace g4::cuda
