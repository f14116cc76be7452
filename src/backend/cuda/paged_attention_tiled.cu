// The split states of Ops::PagedAttention for prefill runs, a tile of a
// sequence's rows at a time: one block per (tile of consecutive rows of one
// sequence, KV head, group of query heads, split of kSplitKeys keys)
// decodes the split's keys and values once into shared memory and computes
// the state of every (row, query head) of the tile, where the split kernel
// (paged_attention.cu) reads them again for every row. The float operations
// and their order are the split kernel's, element for element:
//  - score: per 32-lane slice of head_dim (lane l owns elements l * D32 ..
//    l * D32 + D32 - 1) the fma chain over the slice, then the slices
//    summed in the warp butterfly's tree (offsets 16, 8, 4, 2, 1), times the
//    scale. A warp here holds 16 scores' slices at once and sums them by
//    recursive halving (ReduceScatter): each stage adds the same two
//    partials the butterfly adds, for half the scores, so lanes 2i and
//    2i + 1 end with score i's butterfly sum, at about one shuffle per
//    score instead of five;
//  - softmax: the split kernel's code, one warp per (row, query head), keys
//    numbered from the row's first key in the split;
//  - values: per element, fma chains over the row's keys 0-7, 8-15, ...
//    (the split kernel's warps), added in order; chains past the row's
//    last key add 0.
// Rows of the tile whose window or causal range misses the split (a
// sliding window's start, the diagonal) simply have no state there.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/paged_attention_core.cuh"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace g4::cuda::attn {
namespace {

constexpr int kTileQueries = 32;  // (row, query head) pairs per block
static_assert(kTileQueries == 32, "a lane per tile row entry (trow) and per p column");
constexpr int kTileThreads = kWarps * 32;
// Row strides of the score and p arrays in shared memory, padded against
// bank conflicts: a warp's score stores hit 8 queries' rows, its p stores
// 32 keys' rows; 36 keeps p rows 16-byte aligned for the value loop.
constexpr int kScoreStride = kSplitKeys + 1;
constexpr int kPStride = kTileQueries + 4;

template <int D32>
struct TileShape {
  // Scores: tasks of kTaskQueries x kTaskKeys = 16 scores per warp (q of
  // the task's queries in registers), the keys read kKeyChunk at a time
  // into shared memory.
  static constexpr int kTaskScores = 16;
  static constexpr int kTaskQueries = D32 >= 16 ? 4 : 8;
  static constexpr int kTaskKeys = kTaskScores / kTaskQueries;
  static constexpr int kKeyChunk = D32 >= 16 ? 32 : 64;
  static constexpr int kQueryGroups = kTileQueries / kTaskQueries;   // 4 or 8
  static constexpr int kWarpsPerQueryGroup = kWarps / kQueryGroups;  // 2 or 1
  static constexpr int kTasksPerWarp = kKeyChunk / kTaskKeys / kWarpsPerQueryGroup;
  // Values: a thread owns kPvQueries queries x kPvElems elements of its
  // lane's slice; a pass covers kPassElems elements of every slice, all
  // kSplitKeys keys in shared memory.
  static constexpr int kPvQueries = D32 >= 8 ? 8 : 4;
  static constexpr int kPvElems = D32 < 4 ? D32 : 4;
  static constexpr int kPvQueryGroups = kTileQueries / kPvQueries;  // 4 or 8
  static constexpr int kPvWarpsPerGroup = kWarps / kPvQueryGroups;  // 2 or 1
  static constexpr int kPassElems = kPvWarpsPerGroup * kPvElems;
  static constexpr int kPasses = D32 / kPassElems;
  // Shared-memory layout of a key's (a value's) slices: [piece][lane][W],
  // W = kVec consecutive elements of a lane's slice, so a lane's W elements
  // are one access and a quarter warp's are 128 contiguous bytes.
  static constexpr int kVec = D32 < 4 ? D32 : 4;
  static constexpr int kBufferFloats =
      (kKeyChunk * D32 > kSplitKeys * kPassElems ? kKeyChunk * D32 : kSplitKeys * kPassElems) * 32;
  static constexpr int kScoreFloats = (kTileQueries * kScoreStride + 3) / 4 * 4;
  static constexpr int kSharedFloats = kBufferFloats + kScoreFloats + kSplitKeys * kPStride;
  static_assert(kTasksPerWarp * kWarpsPerQueryGroup * kTaskKeys == kKeyChunk);
  static_assert(kPasses * kPassElems == D32);
};

// N (16 or 32) values per lane -> v[0] of lane i is the butterfly sum
// (WarpSum: offsets 16, 8, 4, 2, 1) over the lanes of their value i / (32 /
// N): halving stages while a lane holds more than one value, then plain
// butterfly stages.
template <int N>
__device__ __forceinline__ void ReduceScatter(float (&v)[N], int lane) {
  static_assert(N == 16 || N == 32);
#pragma unroll
  for (int o = 16, half = N / 2; o >= 1; o >>= 1, half >>= 1) {
    if (half >= 1) {
      const bool upper = (lane & o) != 0;
#pragma unroll
      for (int t = 0; t < half; ++t) {
        const float keep = upper ? v[t + half] : v[t];
        const float send = upper ? v[t] : v[t + half];
        v[t] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    } else {
      v[0] = v[0] + __shfl_xor_sync(0xffffffffu, v[0], o);
    }
  }
}

// W (1, 2 or 4) consecutive floats at p, 4 W-byte aligned: one access.
template <int W>
__device__ __forceinline__ void LoadVec(const float* p, float* v) {
  if constexpr (W == 4) {
    const float4 u = *reinterpret_cast<const float4*>(p);
    v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w;
  } else if constexpr (W == 2) {
    const float2 u = *reinterpret_cast<const float2*>(p);
    v[0] = u.x, v[1] = u.y;
  } else {
    v[0] = *p;
  }
}
template <int W>
__device__ __forceinline__ void StoreVec(float* p, const float* v) {
  if constexpr (W == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (W == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
    *p = v[0];
  }
}

// Per tile row of the current segment: its key range in the split
// (first = offset from the split's first key, count 0 = no state) and
// where its state goes.
struct TileRow {
  int first, count, split;
};

template <int D32>
__global__ __launch_bounds__(kTileThreads, 2) void TiledKernel(AttnParams a, int tile_rows,
                                                               int heads_per_group, int head_groups,
                                                               int64_t rows) {
  using S = TileShape<D32>;
  float* sm = reinterpret_cast<float*>(DynamicShared());
  float* buf = sm;                             // keys [chunk][D32][32], then values [key][pass elems][32]
  float* sc = buf + S::kBufferFloats;  // [kTileQueries][kScoreStride] scores
  float* pt = sc + S::kScoreFloats;    // [kSplitKeys][kPStride] p, transposed for the values
  __shared__ TileRow trow[kTileQueries];
  __shared__ int span[2];   // the segment's keys in the split: [span[0], span[1])
  __shared__ AttnStore st;  // the segment's store (a copy: no local-memory struct)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kh = blockIdx.y / head_groups, hg = blockIdx.y % head_groups;
  const int64_t t0 = static_cast<int64_t>(blockIdx.z) * tile_rows;
  if (t0 >= rows) return;
  const int64_t t_end = std::min<int64_t>(t0 + tile_rows, rows);
  const int G = a.group, d = a.d, g0 = hg * heads_per_group;
  const int gn = min(heads_per_group, G - g0);
  const int e0 = lane * D32;
  const int valid = max(0, min(D32, d - e0));
  const int64_t base = static_cast<int64_t>(kh) * d + e0;
  // Launched as a dependent (pdl.cuh) that never lets its own dependent
  // start early: the split kernel after it has blocks that end without
  // work, and the merge must still find every state of this kernel.
  WaitForPredecessor();

  for (int64_t cur = t0; cur < t_end;) {
    // The segment: the tile's next rows of one sequence.
    const Segment sg = NextSegment(a, cur, t_end);
    const int32_t seq = sg.seq;
    const int seg_rows = sg.rows;
    const int64_t seg0 = sg.seg0;
    if (!TiledSeq(a, seq)) continue;
    const RowInfo first = ReadRow(a, a.row0 + seg0);
    const int32_t s_abs = first.lo / kSplitKeys + static_cast<int32_t>(blockIdx.x);
    const int32_t k0 = s_abs * kSplitKeys;
    __syncthreads();  // the previous segment is done with trow, span and the buffers
    if (warp == 0) {
      int f = kSplitKeys, c = 0, sp = 0;
      if (lane < seg_rows) {
        const RowInfo ri = ReadRow(a, a.row0 + seg0 + lane);
        if (s_abs >= ri.lo / kSplitKeys && k0 <= ri.pos) {
          const int32_t kb = max(ri.lo, k0), ke = min(ri.pos + 1, k0 + kSplitKeys);
          f = kb - k0;
          c = ke - kb;
          sp = s_abs - ri.lo / kSplitKeys;
        }
      }
      trow[lane] = TileRow{f, c, sp};
      const int lo =
          static_cast<int>(__reduce_min_sync(0xffffffffu, static_cast<unsigned>(c > 0 ? f : kSplitKeys)));
      const int hi =
          static_cast<int>(__reduce_max_sync(0xffffffffu, static_cast<unsigned>(c > 0 ? f + c : 0)));
      if (lane == 0) {
        span[0] = lo, span[1] = hi;
        st = first.store == 0 ? a.store[0] : a.store[1];
      }
    }
    __syncthreads();
    const int u0 = span[0], u1 = span[1];
    if (u1 <= u0) continue;  // no row of the segment reaches this split
    if (st.records == nullptr) __trap();

    // 1. scores
    {
      constexpr int AQ = S::kTaskQueries, BK = S::kTaskKeys, KC = S::kKeyChunk, W = S::kVec;
      const int qg = warp / S::kWarpsPerQueryGroup;
      const int task0 = (warp % S::kWarpsPerQueryGroup) * S::kTasksPerWarp;
      for (int c0 = 0; c0 < kSplitKeys; c0 += KC) {
        if (c0 >= u1 || c0 + KC <= u0) continue;
        __syncthreads();  // the buffer's previous chunk is consumed
        for (int kk = warp; kk < KC; kk += kWarps) {
          const int j = c0 + kk;
          float kv[D32];
          if (j >= u0 && j < u1) {
            LoadSlice<D32>(st, Record(a, st, seq, k0 + j), base, valid, false, kv);
          } else {
#pragma unroll
            for (int i = 0; i < D32; ++i) kv[i] = 0.0f;
          }
#pragma unroll
          for (int i = 0; i < D32; i += W)
            StoreVec<W>(buf + ((kk * (D32 / W) + i / W) * 32 + lane) * W, kv + i);
        }
        __syncthreads();
        // q of the warp's queries (read per chunk: not live while keys decode)
        float q[AQ][D32];
#pragma unroll
        for (int aq = 0; aq < AQ; ++aq) {
          const int qi = qg * AQ + aq, rr = qi / heads_per_group, gg = qi % heads_per_group;
          const bool ok = rr < seg_rows && gg < gn;
          const float* qrow =
              a.q + (a.row0 + seg0 + (ok ? rr : 0)) * a.ldq + (static_cast<int64_t>(kh) * G + g0 + gg) * d;
#pragma unroll
          for (int i = 0; i < D32; i += W) {
            if (a.q_vec && ok) {
              LoadVec<W>(qrow + e0 + i, q[aq] + i);
            } else {
#pragma unroll
              for (int ii = 0; ii < W; ++ii) q[aq][i + ii] = ok && i + ii < valid ? qrow[e0 + i + ii] : 0.0f;
            }
          }
        }
        for (int t = 0; t < S::kTasksPerWarp; ++t) {
          const int kb0 = (task0 + t) * BK;  // the task's first key in the chunk
          if (c0 + kb0 >= u1 || c0 + kb0 + BK <= u0) continue;
          float part[S::kTaskScores];
#pragma unroll
          for (int t = 0; t < S::kTaskScores; ++t) part[t] = 0.0f;
          // W elements at a time (each score's chain still runs i = 0 .. D32 - 1).
#pragma unroll
          for (int i = 0; i < D32; i += W) {
#pragma unroll
            for (int bk = 0; bk < BK; ++bk) {
              float k[W];
              LoadVec<W>(buf + (((kb0 + bk) * (D32 / W) + i / W) * 32 + lane) * W, k);
#pragma unroll
              for (int ii = 0; ii < W; ++ii)
#pragma unroll
                for (int aq = 0; aq < AQ; ++aq)
                  part[aq * BK + bk] = __fmaf_rn(q[aq][i + ii], k[ii], part[aq * BK + bk]);
            }
          }
          ReduceScatter(part, lane);
          constexpr int kLanesPerScore = 32 / S::kTaskScores;
          const int t_mine = lane / kLanesPerScore;
          if (lane % kLanesPerScore == 0)
            sc[(qg * AQ + t_mine / BK) * kScoreStride + c0 + kb0 + t_mine % BK] = part[0] * a.scale;
        }
      }
    }
    __syncthreads();

    // 2. softmax statistics, one warp per (row, query head)
    for (int qi = warp; qi < kTileQueries; qi += kWarps) {
      const int rr = qi / heads_per_group, gg = qi % heads_per_group;
      if (rr >= seg_rows || gg >= gn) continue;
      const TileRow tr = trow[rr];
      if (tr.count == 0) continue;
      float* srow = sc + qi * kScoreStride + tr.first;
      const int nk = tr.count;
      const SplitSoftmax sm = SplitSoftmaxOf(lane < nk ? srow[lane] : -INFINITY,
                                             lane + 32 < nk ? srow[lane + 32] : -INFINITY, nk, lane);
      if (lane < nk) pt[(tr.first + lane) * kPStride + qi] = sm.p0;
      if (lane + 32 < nk) pt[(tr.first + lane + 32) * kPStride + qi] = sm.p1;
      const float l = WarpSum(sm.p0 + sm.p1);
      if (lane == 0) {
        float* out = a.partial + (((seg0 + rr) * a.kv_heads + kh) * a.splits_max + tr.split) * StateFloats(a);
        out[g0 + gg] = sm.m;
        out[G + g0 + gg] = l;
      }
    }

    // 3. values
    {
      constexpr int PQ = S::kPvQueries, PE = S::kPvElems, PI = S::kPassElems;
      const int pg = warp / S::kPvWarpsPerGroup, sub = warp % S::kPvWarpsPerGroup;
      // The key range of query pq of this thread (count 0: no state here);
      // read from shared memory where needed rather than held.
      auto query_keys = [&](int pq) {
        const int qi = pg * PQ + pq, rr = qi / heads_per_group, gg = qi % heads_per_group;
        const bool ok = rr < seg_rows && gg < gn;
        const TileRow tr = trow[ok ? rr : 0];
        return int2{tr.first, ok ? tr.count : 0};
      };
      for (int pass = 0; pass < S::kPasses; ++pass) {
        const int i_pass = pass * PI;  // the pass's first element of each slice
        __syncthreads();               // scores (or the previous pass) done with the buffer; p written
        for (int j = u0 + warp; j < u1; j += kWarps) {
          float vv[PI];
          LoadSlice<PI>(st, Record(a, st, seq, k0 + j), base + i_pass, valid - i_pass, true, vv);
#pragma unroll
          for (int i = 0; i < PI; i += PE)
            StoreVec<PE>(buf + ((j * (PI / PE) + i / PE) * 32 + lane) * PE, vv + i);
        }
        __syncthreads();
        // This thread's elements: piece `sub` of the pass, i_pass + sub * PE ...
        const float* vbuf = buf + (sub * 32 + lane) * PE;
        constexpr int kPieces = PI / PE;
        float tot[PQ][PE], ch[PQ][PE];
#pragma unroll
        for (int pq = 0; pq < PQ; ++pq)
#pragma unroll
          for (int i = 0; i < PE; ++i) tot[pq][i] = -0.0f, ch[pq][i] = 0.0f;  // -0 + x == x
        // Uniform: every query with a state here has the same keys (always
        // with one row per warp; otherwise away from window starts and the
        // diagonal), so one loop bound and chain boundary serve them all.
        int uf = 0, un = 0;
        bool uniform = true;
#pragma unroll
        for (int pq = 0; pq < PQ; ++pq) {
          const int2 qk = query_keys(pq);
          if (qk.y == 0) continue;
          if (un == 0) {
            uf = qk.x, un = qk.y;
          } else if (qk.x != uf || qk.y != un) {
            uniform = false;
          }
        }
        if (uniform) {
          for (int w0 = 0; w0 < un; w0 += kKeysPerWarp) {
            if (w0 != 0) {  // the next warp's chain
#pragma unroll
              for (int pq = 0; pq < PQ; ++pq)
#pragma unroll
                for (int i = 0; i < PE; ++i) tot[pq][i] = tot[pq][i] + ch[pq][i], ch[pq][i] = 0.0f;
            }
            const int wn = min(kKeysPerWarp, un - w0);
            for (int jj = 0; jj < wn; ++jj) {
              const int j = uf + w0 + jj;
              float v[PE], p[PQ];
              LoadVec<PE>(vbuf + j * kPieces * 32 * PE, v);
#pragma unroll
              for (int pq = 0; pq < PQ; pq += 4) LoadVec<4>(pt + j * kPStride + pg * PQ + pq, p + pq);
#pragma unroll
              for (int pq = 0; pq < PQ; ++pq)
#pragma unroll
                for (int i = 0; i < PE; ++i) ch[pq][i] = __fmaf_rn(p[pq], v[i], ch[pq][i]);
            }
          }
        } else {
          for (int j = u0; j < u1; ++j) {
            float v[PE];
            LoadVec<PE>(vbuf + j * kPieces * 32 * PE, v);
#pragma unroll
            for (int pq = 0; pq < PQ; ++pq) {
              const int2 qk = query_keys(pq);
              const int rel = j - qk.x;
              if (static_cast<unsigned>(rel) >= static_cast<unsigned>(qk.y)) continue;
              if (rel != 0 && (rel % kKeysPerWarp) == 0) {  // the next warp's chain
#pragma unroll
                for (int i = 0; i < PE; ++i) tot[pq][i] = tot[pq][i] + ch[pq][i], ch[pq][i] = 0.0f;
              }
              const float p = pt[j * kPStride + pg * PQ + pq];
#pragma unroll
              for (int i = 0; i < PE; ++i) ch[pq][i] = __fmaf_rn(p, v[i], ch[pq][i]);
            }
          }
        }
#pragma unroll
        for (int pq = 0; pq < PQ; ++pq) {
          const int nk = query_keys(pq).y;
          if (nk == 0) continue;
          const int qi = pg * PQ + pq, rr = qi / heads_per_group, gg = qi % heads_per_group;
          const bool empty_warps = (nk + kKeysPerWarp - 1) / kKeysPerWarp < kWarps;
          float* out = a.partial +
                       (((seg0 + rr) * a.kv_heads + kh) * a.splits_max + trow[rr].split) * StateFloats(a) +
                       2 * G + static_cast<int64_t>(g0 + gg) * d;
          float t[PE];
#pragma unroll
          for (int i = 0; i < PE; ++i) {
            t[i] = tot[pq][i] + ch[pq][i];
            if (empty_warps) t[i] = t[i] + 0.0f;
          }
          const int e = i_pass + sub * PE;  // within the lane's slice
          if (a.state_vec && e + PE <= valid) {
            StoreVec<PE>(out + e0 + e, t);
          } else {
#pragma unroll
            for (int i = 0; i < PE; ++i)
              if (e + i < valid) out[e0 + e + i] = t[i];
          }
        }
      }
    }
  }
}

template <int D32>
void Launch(const AttnParams& a, int64_t rows, cudaStream_t stream) {
  using S = TileShape<D32>;
  const int heads_per_group = std::min(a.group, kTileQueries);
  const int head_groups = (a.group + heads_per_group - 1) / heads_per_group;
  const int tile_rows = kTileQueries / heads_per_group;
  // Splits a segment of up to tile_rows rows can reach: from its first
  // row's lowest split to its last row's.
  int64_t splits = (a.max_kv_len + kSplitKeys - 1) / kSplitKeys;
  if (a.window > 0) splits = std::min<int64_t>(splits, (a.window - 1 + tile_rows - 1) / kSplitKeys + 2);
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  G4_CHECK_MSG(splits <= 65535 && tiles <= 65535 && static_cast<int64_t>(a.kv_heads) * head_groups <= 65535,
               "[cuda] PagedAttention: tiled launch too large");
  const size_t smem = static_cast<size_t>(S::kSharedFloats) * sizeof(float);
  // A function of D32 alone: raised once (the first call is a prefill,
  // never inside a capture). Always: with the static arrays, even 48 KiB
  // of dynamic memory is past the default limit.
  static const bool raised = [&] {
    G4_CUDA_CHECK(cudaFuncSetAttribute(TiledKernel<D32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    return true;
  }();
  (void)raised;
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.kv_heads * head_groups),
                  static_cast<unsigned>(tiles));
  LaunchDependent(TiledKernel<D32>, grid, dim3(kTileThreads), smem, stream, a, tile_rows, heads_per_group,
                  head_groups, rows);
}

}  // namespace

int TiledMinRows() {
  static const int min_rows = [] {  // read once, as G4_CUDA_MMA_MIN_ROWS is
    const char* e = std::getenv("G4_CUDA_ATTN_TILED_MIN_ROWS");
    return e != nullptr && *e != '\0' ? std::atoi(e) : kTiledMinRowsDefault;
  }();
  return min_rows;
}

void LaunchTiled(const AttnParams& a, int d32, int64_t rows, cudaStream_t stream) {
  switch (d32) {
    case 1:
      return Launch<1>(a, rows, stream);
    case 2:
      return Launch<2>(a, rows, stream);
    case 4:
      return Launch<4>(a, rows, stream);
    case 8:
      return Launch<8>(a, rows, stream);
    default:
      return Launch<16>(a, rows, stream);
  }
}

}  // namespace g4::cuda::attn
