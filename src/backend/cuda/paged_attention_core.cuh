// What the two kernels of Ops::PagedAttention that produce split states
// share (paged_attention.cu: the split kernel and the merge;
// paged_attention_tiled.cu: the query-tiled kernel for prefill runs): the
// launch parameters, the row and record lookups, and the decoding of one
// lane's slice of a record. A row's keys lo..pos are cut at multiples of
// kSplitKeys into splits; a split's state (its maximum m, its sum l, its
// weighted values acc) lands in AttnParams::partial at [row - row0][KV
// head][split - lo / kSplitKeys], and the merge combines a row's splits in
// order. Both kernels compute every state with the same float operations in
// the same order (paged_attention.cu), so which one ran is invisible in the
// bits. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/kv_codec.cuh"
#include "backend/cuda/pdl.cuh"

namespace g4::cuda::attn {

constexpr int kSplitKeys = 64;  // keys per split: 2 per lane in the softmax step
constexpr int kWarps = 8;       // per split block
constexpr int kKeysPerWarp = kSplitKeys / kWarps;

struct AttnStore {
  DevKvFormat f;
  const uint8_t* records = nullptr;
  int64_t num_blocks = 0;
  const float* centroids = nullptr;
  const float* signs = nullptr;
  bool vec = false;  // plain, head slices 16-byte aligned and filling the lanes: wide loads
  // Its rows' states come from the tensor-core kernels
  // (paged_attention_mma.cu), which the other split-state kernels skip.
  bool mma = false;
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
  // Sequences of at least this many rows in the step take the query-tiled
  // kernel (paged_attention_tiled.cu), the others the split kernel; 0: all
  // take the split kernel.
  const int32_t* query_start;
  int tiled_min_rows;
  int64_t max_kv_len;  // StepRows::max_kv_len
  // For the tiled kernel's vector accesses: q rows and head slices 16-byte
  // aligned (head_dim a multiple of 128); split states likewise.
  bool q_vec, state_vec;
  // When set, the tensor-core row kernel merges each row's splits itself
  // (attention_last_merge.cuh) and no merge kernel runs: one zeroed
  // counter per (row of the launch, block row of the grid).
  int* merge_count;
  // When set, TurboQuant rows are merged in chunks of the head and the
  // last chunk's block rotates the row (MergeKernel): one zeroed counter
  // per (row of the launch, query head).
  int* rotate_count;
  // When quant.q is set, the merge also quantizes each output row for the
  // product that follows (ops.h PagedAttentionArgs::next_product): groups
  // of quant_group, codes for quant_bits-bit weights, row r of the step at
  // row r of quant.
  QRows quant;
  int quant_group, quant_bits;
};

__device__ __forceinline__ int64_t StateFloats(const AttnParams& a) {
  return static_cast<int64_t>(a.group) * (2 + a.d);
}

// Rows of sequence `seq` in the step.
__device__ __forceinline__ int32_t SeqRows(const AttnParams& a, int32_t seq) {
  return a.query_start[seq + 1] - a.query_start[seq];
}

// Whether sequence `seq`'s store takes the tensor-core kernels.
__device__ __forceinline__ bool MmaSeq(const AttnParams& a, int32_t seq) {
  return (a.seq_store != nullptr && a.seq_store[seq] != 0) ? a.store[1].mma : a.store[0].mma;
}

// Whether sequence `seq`'s rows go to the query-tiled kernel.
__device__ __forceinline__ bool TiledSeq(const AttnParams& a, int32_t seq) {
  return a.tiled_min_rows > 0 && SeqRows(a, seq) >= a.tiled_min_rows && !MmaSeq(a, seq);
}

// The softmax step of one split for one (row, query head), by one warp, as
// both kernels run it: scores v0, v1 of the row's keys lane and lane + 32
// in the split (-inf past its nk keys) -> the maximum m, p = exp(s - m) (0
// past nk). The split's sum l is then WarpSum(p0 + p1), which each caller
// takes after storing p: that keeps the device code of the tested build.
struct SplitSoftmax {
  float m, p0, p1;
};
__device__ __forceinline__ SplitSoftmax SplitSoftmaxOf(float v0, float v1, int nk, int lane) {
  SplitSoftmax r;
  r.m = WarpMax(fmaxf(v0, v1));
  r.p0 = lane < nk ? expf(v0 - r.m) : 0.0f;
  r.p1 = lane + 32 < nk ? expf(v1 - r.m) : 0.0f;
  return r;
}

// The pieces of a split block's work that the split kernel and the
// streaming split kernel share (the same operations, the same order). A
// block holds GP query heads (g0 .. g0 + gn - 1 of KV head kh's group);
// lane `lane` holds head elements e0 .. e0 + D32 - 1, `valid` of them
// inside head_dim.

// q of the block's heads for row r into registers (0 outside them).
template <int D32, int GP>
__device__ __forceinline__ void LoadSplitQ(const AttnParams& a, int64_t r, int kh, int g0, int gn, int e0, int valid,
                                           float (&q)[GP][D32]) {
  const float* qrow = a.q + r * a.ldq + (static_cast<int64_t>(kh) * a.group + g0) * a.d;
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) q[g][i] = g < gn && i < valid ? qrow[g * a.d + e0 + i] : 0.0f;
}

// One key's scores for the block's heads: each lane's fma chain over its
// elements, the warp butterfly, times the scale; lane 0 stores them (or
// -inf for a key past the split's nk) at column j of sc [GP][kSplitKeys].
template <int D32, int GP>
__device__ __forceinline__ void StoreKeyScores(const float (&q)[GP][D32], const float (&k)[D32], float scale,
                                               bool ok, int j, int lane, float* sc) {
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < D32; ++i) part = __fmaf_rn(q[g][i], k[i], part);
    const float s = WarpSum(part) * scale;
    if (lane == 0) sc[g * kSplitKeys + j] = ok ? s : -INFINITY;
  }
}

// The split's softmax per head, one warp each: sc's scores become p in
// place; stats [2][GP] gets m and l.
template <int GP>
__device__ __forceinline__ void SplitSoftmaxStats(float* sc, float* stats, int nk, int warp, int lane) {
  for (int g = warp; g < GP; g += kWarps) {
    const SplitSoftmax sm = SplitSoftmaxOf(sc[g * kSplitKeys + lane], sc[g * kSplitKeys + lane + 32], nk, lane);
    sc[g * kSplitKeys + lane] = sm.p0;
    sc[g * kSplitKeys + lane + 32] = sm.p1;
    const float l = WarpSum(sm.p0 + sm.p1);
    if (lane == 0) stats[g] = sm.m, stats[GP + g] = l;
  }
}

// acc += p_j v for key j of the split, every head.
template <int D32, int GP>
__device__ __forceinline__ void AccumulateValue(const float* sc, int j, const float (&v)[D32], float (&acc)[GP][D32]) {
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    const float pj = sc[g * kSplitKeys + j];
#pragma unroll
    for (int i = 0; i < D32; ++i) acc[g][i] = __fmaf_rn(pj, v[i], acc[g][i]);
  }
}

// The split's state [m, l, acc] of the block's heads into a.partial: the
// warps' acc added in warp order through red [kWarps][GP][32 * D32] (one
// block barrier inside; every thread calls it).
template <int D32, int GP>
__device__ __forceinline__ void StoreSplitState(const AttnParams& a, int64_t r_local, int kh, int split, int g0,
                                                int gn, const float (&acc)[GP][D32], const float* stats, float* red,
                                                int warp, int lane) {
  constexpr int kSlice = GP * 32 * D32;
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) red[warp * kSlice + (g * 32 + lane) * D32 + i] = acc[g][i];
  __syncthreads();
  const int G = a.group, d = a.d;
  float* out = a.partial + ((r_local * a.kv_heads + kh) * a.splits_max + split) * StateFloats(a);
  for (int t = threadIdx.x; t < gn * d; t += kWarps * 32) {
    const int g = t / d, e = t - g * d;
    const int idx = g * 32 * D32 + e;  // lane e / D32, element e % D32
    float v = red[idx];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v = v + red[w * kSlice + idx];
    out[2 * G + static_cast<int64_t>(g0 + g) * d + e] = v;
  }
  if (threadIdx.x < gn)
    out[g0 + threadIdx.x] = stats[threadIdx.x], out[G + g0 + threadIdx.x] = stats[GP + threadIdx.x];
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

// A split block's keys: row r's keys k_begin .. k_begin + nk - 1 (nk >= 1)
// of its split `split` (counted from the row's first). False when the
// block has nothing to compute: the row has fewer splits, or its sequence
// is the query-tiled kernel's or the tensor-core kernels' (the block then
// waits for its predecessor, so that the merge launched after it finds the
// tiled kernel's states).
// Reads only the step's uploaded arrays.
__device__ __forceinline__ bool BlockSplitKeys(const AttnParams& a, int64_t r, int split, RowInfo& ri,
                                               int64_t& k_begin, int& nk) {
  ri = ReadRow(a, r);
  const int64_t my = ri.lo / kSplitKeys + split;
  if (my * kSplitKeys > ri.pos) return false;
  if (TiledSeq(a, ri.seq) || MmaSeq(a, ri.seq)) {
    WaitForPredecessor();
    return false;
  }
  k_begin = max(static_cast<int64_t>(ri.lo), my * kSplitKeys);
  const int64_t k_end = min(static_cast<int64_t>(ri.pos) + 1, (my + 1) * kSplitKeys);
  nk = static_cast<int>(k_end - k_begin);
  return true;
}

// The tile-walking kernels' segments: the next rows of one sequence from
// row `cur` (of the launch's rows, before t_end): [seg0, seg0 + rows) of
// sequence seq; advances cur past them. Traps on a sequence id out of range.
struct Segment {
  int32_t seq;
  int64_t seg0;
  int rows;
};
__device__ __forceinline__ Segment NextSegment(const AttnParams& a, int64_t& cur, int64_t t_end) {
  Segment s;
  s.seq = a.row_seq[a.row0 + cur];
  int64_t end = cur + 1;
  while (end < t_end && a.row_seq[a.row0 + end] == s.seq) ++end;
  s.seg0 = cur;
  s.rows = static_cast<int>(end - cur);
  cur = end;
  if (s.seq < 0 || s.seq >= a.num_seqs) __trap();
  return s;
}

// Record j of a warp's keys, computed by lane j and broadcast.
__device__ __forceinline__ const uint8_t* TileRecord(const uint8_t* mine, int j) {
  return reinterpret_cast<const uint8_t*>(
      __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(mine), j));
}

// The record of key j (positions fit in 32 bits: 32-bit division).
__device__ __forceinline__ const uint8_t* Record(const AttnParams& a, const AttnStore& s, int32_t seq,
                                                 int32_t j) {
  const int32_t entry = j / a.block_size, slot = j - entry * a.block_size;
  if (entry >= a.table_stride) __trap();
  const int32_t block = a.table[seq * a.table_stride + entry];
  if (block < 0 || block >= s.num_blocks) __trap();  // a visible key in a missing block
  return s.records + (static_cast<int64_t>(block) * a.block_size + slot) * s.f.record_bytes;
}

// D32 elements of a record's K (value=false) or V (value=true) for one lane:
// elements base .. base + D32 - 1, those at or past `valid` read as 0.
// `vec`: a plain store whose head slices sit at 16-byte-aligned offsets and
// fill all 32 lanes, read in wide pieces (same values).
template <int D32>
__device__ __forceinline__ void LoadElems(const AttnStore& st, const uint8_t* rec, int64_t base, int valid,
                                          bool value, float (&out)[D32]) {
  const DevKvFormat& f = st.f;
  if (st.vec) {
    const uint8_t* p = rec + (value ? f.v_codes : f.k_codes);
    if (f.plain_bytes == 2) {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + base;
      uint32_t wbuf[(D32 + 1) / 2];
      if constexpr (D32 >= 8) {
#pragma unroll
        for (int v = 0; v < D32 / 8; ++v) {
          const uint4 u = __ldg(reinterpret_cast<const uint4*>(h) + v);
          wbuf[4 * v] = u.x, wbuf[4 * v + 1] = u.y, wbuf[4 * v + 2] = u.z, wbuf[4 * v + 3] = u.w;
        }
      } else if constexpr (D32 == 4) {
        const uint2 u = __ldg(reinterpret_cast<const uint2*>(h));
        wbuf[0] = u.x, wbuf[1] = u.y;
      } else if constexpr (D32 == 2) {
        wbuf[0] = __ldg(reinterpret_cast<const unsigned int*>(h));
      } else {
        wbuf[0] = __ldg(reinterpret_cast<const unsigned short*>(h));
      }
#pragma unroll
      for (int i = 0; i < D32; ++i) {
        const uint16_t x = static_cast<uint16_t>(wbuf[i / 2] >> (16 * (i % 2)));
        out[i] = f.plain_bf16 ? Bf16ToF32(x) : F16ToF32(x);
      }
      return;
    }
    const float* fp = reinterpret_cast<const float*>(p) + base;
    if constexpr (D32 >= 4) {
#pragma unroll
      for (int v = 0; v < D32 / 4; ++v) {
        const float4 u = __ldg(reinterpret_cast<const float4*>(fp) + v);
        out[4 * v] = u.x, out[4 * v + 1] = u.y, out[4 * v + 2] = u.z, out[4 * v + 3] = u.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < D32; ++i) out[i] = __ldg(fp + i);
    }
    return;
  }
  if (f.kind == kKvTurbo && valid == D32 && base % 32 + D32 <= 32) {
    // The slice lies in one group of 32: its step and zero (or scale) read
    // once; per element DecodeKey's / DecodeValue's operations.
    const int64_t g = base / 32;
    if (!value) {
      const float s = TurboKeyStep(f, rec, g), z = TurboKeyZero(f, rec, g);
#pragma unroll
      for (int i = 0; i < D32; ++i) out[i] = (TurboKeyCode(f, rec, base + i) + z) * s;
    } else {
      const float r = TurboValueScale(f, rec, g);
#pragma unroll
      for (int i = 0; i < D32; ++i) out[i] = TurboValueCentroid(f, rec, base + i, st.centroids) * r;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < D32; ++i)
    out[i] = i < valid ? (value ? DecodeValue(f, rec, base + i, st.centroids) : DecodeKey(f, rec, base + i))
                       : 0.0f;
}

// LoadElems with the per-element decoding out of line. Inlined, the codec
// branches of every element of every key fill the kernel: the split
// kernel's one-block-per-SM decode launch then waited on instruction fetch
// for 45 % of its cycles (Nsight Compute, e4b batch 1), and in the tiled
// kernel they keep registers the score and value loops need.
template <int N>
__device__ __noinline__ void LoadElemsDecoded(const AttnStore& st, const uint8_t* rec, int64_t base, int valid,
                                              bool value, float (&out)[N]) {
  LoadElems<N>(st, rec, base, valid, value, out);
}
template <int N>
__device__ __forceinline__ void LoadSlice(const AttnStore& st, const uint8_t* rec, int64_t base, int valid,
                                          bool value, float (&out)[N]) {
  if (st.vec) {
    LoadElems<N>(st, rec, base, valid, value, out);
  } else {
    // The call takes addresses: handed the caller's store and slice, it
    // would keep both in local memory on the plain path too (every plain
    // key's elements stored to the stack and read back, the store's fields
    // read from it). Copies, made on this path only, keep them in registers.
    const AttnStore copy = st;
    float decoded[N];
    LoadElemsDecoded<N>(copy, rec, base, valid, value, decoded);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = decoded[i];
  }
}

// Query heads per block of the grouped split kernels: all of a KV head's
// that fit in 32 floats of q per lane (4 at head_dim 256, 2 at 512).
constexpr int WideHeads(int d32) { return 32 / d32 < 16 ? 32 / d32 : 16; }

// Host side of the streaming split kernel (paged_attention_stream.cu).
// G4_CUDA_ATTN_STREAM, read at every call (tests switch it): 0 off, 1 plain
// keys and values through shared memory, 2 plain keys only (values through
// L2), unset or anything else automatic (plain values too at head_dim 256);
// turbo stores stream keys and values unless it is 0.
constexpr int kStreamAuto = -1, kStreamOff = 0, kStreamKeysAndValues = 1, kStreamKeys = 2;
int StreamMode();
// The streaming kernel's layout for a's split launch, or kStreamNone (the
// split kernel): head_dim 256 or 512 (d32 8 or 16) and every store in use
// plain 2-byte with vec slices, or every one turbo in 16-byte pieces.
constexpr int kStreamNone = -1, kStreamPlainKeysValues = 0, kStreamPlainKeys = 1, kStreamTurbo = 2;
int StreamLayoutFor(const AttnParams& a, int d32, int mode);
// The split kernel's launch (same grid, same head grouping: GP 1 when
// `narrow`, else WideHeads) on the streaming kernel; bitwise its states.
void LaunchStreamSplit(const AttnParams& a, int d32, int layout, bool narrow, const dim3& grid, int head_groups,
                       int group_heads, cudaStream_t stream);

// Host side of the query-tiled kernel (paged_attention_tiled.cu).
// G4_CUDA_ATTN_TILED_MIN_ROWS (default kTiledMinRowsDefault; 0: never)
// sets AttnParams::tiled_min_rows; tests set 1 to put every row there.
constexpr int kTiledMinRowsDefault = 8;
int TiledMinRows();
// The split states of the `rows` rows from a.row0 whose sequences
// TiledSeq selects; d32 = head_dim / 32 rounded up to 1, 2, 4, 8 or 16.
void LaunchTiled(const AttnParams& a, int d32, int64_t rows, cudaStream_t stream);

// Host side of the tensor-core kernels (paged_attention_mma.cu).
// G4_CUDA_ATTN_MMA, read at every call (tests switch it): "0" keeps every
// store on the CUDA-core kernels, any other value lets the stores
// MmaStorable admits take the tensor-core kernels; unset, kMmaByDefault
// decides (on since they passed every CUDA test on an H100 and won there,
// docs/benchmarks.md 2026-12-05 evening).
constexpr bool kMmaByDefault = true;
bool MmaModeOn();
// Plain bf16 with vec slices, head_dim 64, 128, 256 or 512.
bool MmaStorable(const AttnStore& st, int d);
// The split states of the `rows` rows from a.row0 whose stores are mma:
// `runs` picks the run kernel (64 entries of consecutive rows per block)
// over the row kernel (one row's heads per block); the states are the same.
void LaunchMma(const AttnParams& a, bool runs, int64_t rows, cudaStream_t stream);

}  // namespace g4::cuda::attn
