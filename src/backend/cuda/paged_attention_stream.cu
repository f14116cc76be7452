// The streaming split kernel of Ops::PagedAttention: the split kernel's
// work (paged_attention.cu: one block of kWarps warps per (row, KV head,
// split, group of query heads)) and its float operations in its order, so
// its split states are bitwise the split kernel's; what differs is how the
// keys and values reach the lanes. The split kernel has each warp load its
// 8 keys' slices into registers, 4 to 8 keys at a time, and wait for them
// before the scores, then for the values after the softmax: a chain of
// dependent waits with one block per SM at head_dim 512 (about 0.5 TB/s at
// 32k context on e4b). Here, right after the dependent wait, the block's
// 256 threads request the whole split's key slices (and value slices) of
// their KV head into shared memory with cp.async, 4 threads per key, so a
// split's bytes (64 or 128 KB) are in flight at once; then the lanes read
// their slices from shared memory.
//
// Stores: plain 2-byte (bf16, f16) whose head slices are 16-byte aligned
// and fill the lanes (AttnStore::vec), and TurboQuant stores whose head
// parts are whole 16-byte pieces (every format at head_dim 256 and 512), at
// head_dim 256 and 512 only; the dispatch in paged_attention.cu keeps the
// split kernel for everything else. Shared memory holds a plain key's
// slice as [piece][lane] 16-byte pieces (a lane's D32 elements are D32 / 8
// pieces), so a warp's read of one piece is 512 contiguous bytes, free of
// bank conflicts; a turbo key's part as a one-head record's K (codes,
// steps, zeros) and V (codes, scales), whose lanes decode their codes as
// runs of words (turbo_lane_codes.cuh) to LoadElems' values, in key loops
// that are not unrolled, one per bit width, chosen once per phase
// (TurboScores, TurboValues): short enough for the instruction cache.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/paged_attention_core.cuh"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/turbo_lane_codes.cuh"

namespace g4::cuda::attn {
namespace {

constexpr int kThreads = kWarps * 32;
constexpr int kCopyThreadsPerKey = kThreads / kSplitKeys;  // 4
constexpr int kLine = 128;                                 // bytes per L2 prefetch

template <int D32>
struct StreamShape {
  static_assert(D32 == 8 || D32 == 16, "head_dim 256 or 512");
  static constexpr int kPieces = D32 / 8;                  // 16-byte pieces of a lane's slice
  static constexpr int kSliceBytes = 32 * D32 * 2;         // one key's head slice
  static constexpr int kChunks = kSliceBytes / 16;         // its 16-byte copies
  static_assert(kChunks % kCopyThreadsPerKey == 0, "a key's copies split evenly");
};

// Thread `sub` of a key's kCopyThreadsPerKey copies chunks sub, sub + 4, ...
// of the slice at `src` (chunk c: lane c / P's piece c % P) to key j's
// [piece][lane] area of `region`.
template <int D32>
__device__ __forceinline__ void CopySlice(uint8_t* region, int j, const uint8_t* src, int sub) {
  using S = StreamShape<D32>;
  uint8_t* dst = region + j * S::kSliceBytes;
#pragma unroll
  for (int i = 0; i < S::kChunks / kCopyThreadsPerKey; ++i) {
    const int c = i * kCopyThreadsPerKey + sub;
    const int lane = c / S::kPieces, piece = c % S::kPieces;
    CpAsync16(dst + (piece * 32 + lane) * 16, src + c * 16);
  }
}

// A lane's D32 plain 2-byte elements from their codes packed two per word
// (element i in word i / 2, the low half first): LoadElems' conversion.
template <int D32>
__device__ __forceinline__ void UnpackPlain2(const uint32_t (&w)[D32 / 2], bool bf16, float (&out)[D32]) {
#pragma unroll
  for (int i = 0; i < D32; ++i) {
    const uint16_t x = static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2)));
    out[i] = bf16 ? Bf16ToF32(x) : F16ToF32(x);
  }
}

// Lane `lane`'s D32 elements of key j's slice in `region`: LoadElems' values.
template <int D32>
__device__ __forceinline__ void ReadSlice(const uint8_t* region, int j, int lane, bool bf16, float (&out)[D32]) {
  using S = StreamShape<D32>;
  const uint8_t* key = region + j * S::kSliceBytes;
  uint32_t w[D32 / 2];
#pragma unroll
  for (int v = 0; v < S::kPieces; ++v) {
    const uint4 u = *reinterpret_cast<const uint4*>(key + (v * 32 + lane) * 16);
    w[4 * v] = u.x, w[4 * v + 1] = u.y, w[4 * v + 2] = u.z, w[4 * v + 3] = u.w;
  }
  UnpackPlain2<D32>(w, bf16, out);
}

// Lane `lane`'s elements of a plain 2-byte slice in global memory (16-byte
// aligned): LoadElems' vec path without the other codecs' code.
template <int D32>
__device__ __forceinline__ void LoadPlain2(const uint8_t* slice, bool bf16, float (&out)[D32]) {
  uint32_t w[D32 / 2];
#pragma unroll
  for (int v = 0; v < D32 / 8; ++v) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(slice) + v);
    w[4 * v] = u.x, w[4 * v + 1] = u.y, w[4 * v + 2] = u.z, w[4 * v + 3] = u.w;
  }
  UnpackPlain2<D32>(w, bf16, out);
}

// Where a block keeps the split's slices: keys from byte 0 (k_region bytes,
// which also hold the warps' sums at the end), then values (v_region bytes,
// none when they come through L2), then the scores and statistics, then
// (turbo, lane_runs) the store's value codebook. lane_runs: turbo lanes
// decode their codes as runs of words (turbo_lane_codes.cuh) rather than
// element by element; the same values either way.
struct StreamSmem {
  int k_region = 0, v_region = 0;
  bool lane_runs = false;
};

// A TurboQuant record's bytes for one KV head (the elements of head kh are
// contiguous in each array, byte-aligned since head_dim is a multiple of
// 32): code bytes of a key, of one fp16 plane (steps, zeros or scales: a
// value per 32 elements), code bytes of a value. In shared memory a key's
// part is [codes][steps][zeros], a value's [codes][scales]: the layout of a
// one-head record's K and V, so the shared decoders read it unchanged.
struct TurboHeadBytes {
  int key_codes, plane, value_codes;
  __host__ __device__ int key_part() const { return key_codes + 2 * plane; }
  __host__ __device__ int value_part() const { return value_codes + plane; }
};
__host__ __device__ inline TurboHeadBytes TurboHeadBytesOf(const DevKvFormat& f) {
  return {f.head_dim * f.key_bits / 8, f.head_dim / 16, f.head_dim * f.value_bits / 8};
}

// Thread `sub` of a key's copies: chunks sub, sub + 4, ... of the key's
// part of head kh of a turbo record (value: its value part) to `dst`.
__device__ __forceinline__ void CopyTurboPart(uint8_t* dst, const uint8_t* rec, const DevKvFormat& f,
                                              const TurboHeadBytes& hb, int kh, bool value, int sub) {
  const int bytes = value ? hb.value_part() : hb.key_part();
  const int codes = value ? hb.value_codes : hb.key_codes;
  const uint8_t* code_src = rec + (value ? f.v_codes : f.k_codes) + static_cast<int64_t>(kh) * codes;
  const uint8_t* plane0 = rec + (value ? f.v_scales : f.k_scales) + static_cast<int64_t>(kh) * hb.plane;
  const uint8_t* plane1 = rec + f.k_biases + static_cast<int64_t>(kh) * hb.plane;  // keys' zeros
  for (int off = sub * 16; off < bytes; off += kCopyThreadsPerKey * 16) {
    const uint8_t* src = off < codes               ? code_src + off
                         : off < codes + hb.plane ? plane0 + (off - codes)
                                                  : plane1 + (off - codes - hb.plane);
    CpAsync16(dst + off, src);
  }
}

// A one-head record's offsets for the parts in shared memory (keys and
// values in separate areas, so both code arrays start at 0).
__device__ __forceinline__ DevKvFormat OneHeadTurbo(const DevKvFormat& f, const TurboHeadBytes& hb) {
  DevKvFormat m = f;
  m.heads = 1;
  m.k_codes = 0, m.k_scales = hb.key_codes, m.k_biases = hb.key_codes + hb.plane;
  m.v_codes = 0, m.v_scales = hb.value_codes, m.v_biases = 0;
  return m;
}

// Elements e0 .. e0 + D32 - 1 (one group of 32) of a key or value part in
// shared memory, element by element: LoadElems' turbo slice, the same
// operations (the G4_CUDA_ATTN_TURBO_RUNS=0 path; runs of words below).
template <int D32>
__device__ __forceinline__ void TurboKeySlice(const DevKvFormat& m, const uint8_t* part, int e0, float (&out)[D32]) {
  const int g = e0 / 32;
  const float s = TurboKeyStep(m, part, g), z = TurboKeyZero(m, part, g);
#pragma unroll
  for (int i = 0; i < D32; ++i) out[i] = (TurboKeyCode(m, part, e0 + i) + z) * s;
}
template <int D32>
__device__ __forceinline__ void TurboValueSlice(const DevKvFormat& m, const uint8_t* part, int e0,
                                                const float* centroids, float (&out)[D32]) {
  const float r = TurboValueScale(m, part, e0 / 32);
#pragma unroll
  for (int i = 0; i < D32; ++i) out[i] = TurboValueCentroid(m, part, e0 + i, centroids) * r;
}

// The scores of a warp's keys in a turbo split for key width B (0: element
// by element), in a loop that is not unrolled: one width's code, short
// enough to stay in the instruction cache (the unrolled loops with every
// width's decoder inline made instruction fetch the kernel's first stall).
// The same operations as the unrolled loop, key by key.
template <int D32, int GP, int B>
__device__ __forceinline__ void TurboScores(const DevKvFormat& m, const uint8_t* k_region, int k_part, int j0, int nk,
                                            int e0, const float (&q)[GP][D32], float scale, int lane, float* sc) {
#pragma unroll 1
  for (int jj = 0; jj < kKeysPerWarp; ++jj) {
    const int j = j0 + jj;
    if (j < nk) {
      float kv[D32];
      if constexpr (B == 0) {
        TurboKeySlice<D32>(m, k_region + j * k_part, e0, kv);
      } else {
        TurboKeyRun<D32, B>(m, k_region + j * k_part, e0, kv);
      }
      StoreKeyScores<D32, GP>(q, kv, scale, true, j, lane, sc);
    } else if (lane == 0) {
#pragma unroll
      for (int g = 0; g < GP; ++g) sc[g * kSplitKeys + j] = -INFINITY;
    }
  }
}

// acc over a warp's keys of a turbo split for value width B (0: element by
// element, the codebook in global memory), likewise.
template <int D32, int GP, int B>
__device__ __forceinline__ void TurboValues(const DevKvFormat& m, const uint8_t* v_region, int v_part, int j0, int nk,
                                            int e0, const float* centroids, const float* codebook, const float* sc,
                                            float (&acc)[GP][D32]) {
#pragma unroll 1
  for (int jj = 0; jj < kKeysPerWarp; ++jj) {
    const int j = j0 + jj;
    if (j >= nk) break;
    float vv[D32];
    if constexpr (B == 0) {
      TurboValueSlice<D32>(m, v_region + j * v_part, e0, centroids, vv);
    } else {
      TurboValueRun<D32, B>(m, v_region + j * v_part, e0, codebook, vv);
    }
    AccumulateValue<D32, GP>(sc, j, vv, acc);
  }
}

// The split kernel (SplitKernel in paged_attention.cu) with the split's key
// slices, and its value slices unless kLayout is kPlainKeys, copied into
// shared memory first. With kPlainKeys each warp loads its keys' value
// slices from global memory (in L2 by then: requested before the dependent
// wait) KB at a time as the split kernel does. The block's work, the lanes'
// element slices, every float operation and its order are the split
// kernel's. kMinBlocks: blocks per SM the registers are capped for.
template <int D32, int GP, int kLayout, int kMinBlocks>
__global__ __launch_bounds__(kThreads, kMinBlocks) void StreamSplitKernel(AttnParams a, int head_groups,
                                                                          int group_heads, StreamSmem layout) {
  using S = StreamShape<D32>;
  constexpr bool kTurbo = kLayout == kStreamTurbo;
  constexpr bool kVShared = kLayout != kStreamPlainKeys;
  constexpr int KB = D32 <= 8 ? kKeysPerWarp : kKeysPerWarp / 2;  // value slices loaded at once (global)
  uint8_t* smem = DynamicShared();
  uint8_t* k_region = smem;
  uint8_t* v_region = smem + layout.k_region;
  float* sc = reinterpret_cast<float*>(smem + layout.k_region + layout.v_region);  // [GP][kSplitKeys]
  float* stats = sc + GP * kSplitKeys;                                           // [2][GP]: m, l
  float* codebook = stats + 2 * GP;                                              // turbo, lane_runs
  float* red = reinterpret_cast<float*>(k_region);  // [kWarps][GP][32 * D32], once every key is read

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
  const int64_t slice_off = static_cast<int64_t>(kh) * d * 2;  // plain: head kh's slice in a K or V array
  const bool bf16 = st.f.plain_bf16;
  const TurboHeadBytes hb = TurboHeadBytesOf(st.f);  // turbo only
  const int k_part = kTurbo ? hb.key_part() : S::kSliceBytes;
  const int v_part = kTurbo ? hb.value_part() : S::kSliceBytes;
  const bool runs = kTurbo && layout.lane_runs;
  // The codebook is uploaded with the store (never written by a step's
  // kernels): read before the dependent wait; the first barrier below
  // publishes it.
  if (runs)
    for (int t = threadIdx.x; t < (1 << st.f.value_bits); t += kThreads) codebook[t] = st.centroids[t];

  // Thread t copies key t / 4's slices; its lines go to L2 before the wait.
  const int cj = threadIdx.x / kCopyThreadsPerKey, sub = threadIdx.x % kCopyThreadsPerKey;
  const uint8_t* copy_rec =
      cj < nk ? Record(a, st, ri.seq, static_cast<int32_t>(k_begin + cj)) : nullptr;
  if (copy_rec != nullptr) {
    if constexpr (kTurbo) {
      const uint8_t* kc = copy_rec + st.f.k_codes + static_cast<int64_t>(kh) * hb.key_codes;
      const uint8_t* vc = copy_rec + st.f.v_codes + static_cast<int64_t>(kh) * hb.value_codes;
      for (int off = sub * kLine; off < hb.key_codes; off += kCopyThreadsPerKey * kLine)
        PrefetchL2(kc + off);
      for (int off = sub * kLine; off < hb.value_codes; off += kCopyThreadsPerKey * kLine)
        PrefetchL2(vc + off);
      const int64_t plane = static_cast<int64_t>(kh) * hb.plane;
      const int64_t plane_off = sub == 0 ? st.f.k_scales : sub == 1 ? st.f.k_biases : st.f.v_scales;
      if (sub < 3) PrefetchL2(copy_rec + plane_off + plane);
    } else {
      const uint8_t* k_src = copy_rec + st.f.k_codes + slice_off;
      const uint8_t* v_src = copy_rec + st.f.v_codes + slice_off;
      for (int off = sub * kLine; off < S::kSliceBytes; off += kCopyThreadsPerKey * kLine) {
        PrefetchL2(k_src + off);
        PrefetchL2(v_src + off);
      }
    }
  }
  const int j0 = warp * kKeysPerWarp;  // the warp's first key in the split
  // kPlainKeys: lane j < 8 holds the record of the warp's key j.
  const uint8_t* my_rec = !kVShared && lane < kKeysPerWarp && j0 + lane < nk
                              ? Record(a, st, ri.seq, static_cast<int32_t>(k_begin + j0 + lane))
                              : nullptr;
  // Up to here the kernel read only the step's uploaded arrays; q and the
  // records are written by this step's kernels.
  FollowPredecessor();
  if (copy_rec != nullptr) {
    if constexpr (kTurbo) {
      CopyTurboPart(k_region + cj * k_part, copy_rec, st.f, hb, kh, false, sub);
    } else {
      CopySlice<D32>(k_region, cj, copy_rec + st.f.k_codes + slice_off, sub);
    }
  }
  CpAsyncCommit();
  if constexpr (kVShared) {
    if (copy_rec != nullptr) {
      if constexpr (kTurbo) {
        CopyTurboPart(v_region + cj * v_part, copy_rec, st.f, hb, kh, true, sub);
      } else {
        CopySlice<D32>(v_region, cj, copy_rec + st.f.v_codes + slice_off, sub);
      }
    }
    CpAsyncCommit();
  }

  float q[GP][D32];
  LoadSplitQ<D32, GP>(a, r, kh, g0, gn, e0, D32, q);  // d = 32 * D32: every lane's elements valid
  const DevKvFormat m = OneHeadTurbo(st.f, hb);  // turbo only

  if constexpr (kVShared) {
    CpAsyncWait<1>();  // this thread's key copies
  } else {
    CpAsyncWait<0>();
  }
  __syncthreads();  // everyone's
  // 1. scores (keys past nk were never copied: their score is -inf, as the
  // split kernel's)
  if constexpr (kTurbo) {
    WithKeyRunWidth(runs ? m.key_bits : 0, [&]<int B>() {
      TurboScores<D32, GP, B>(m, k_region, k_part, j0, nk, e0, q, a.scale, lane, sc);
    });
  } else {
#pragma unroll
    for (int jj = 0; jj < kKeysPerWarp; ++jj) {
      const int j = j0 + jj;
      if (j < nk) {
        float kv[D32];
        ReadSlice<D32>(k_region, j, lane, bf16, kv);
        StoreKeyScores<D32, GP>(q, kv, a.scale, true, j, lane, sc);
      } else if (lane == 0) {
#pragma unroll
        for (int g = 0; g < GP; ++g) sc[g * kSplitKeys + j] = -INFINITY;
      }
    }
  }
  __syncthreads();
  // 2. softmax statistics of the split, one warp per query head
  SplitSoftmaxStats<GP>(sc, stats, nk, warp, lane);
  if constexpr (kVShared) CpAsyncWait<0>();  // this thread's value copies
  __syncthreads();
  // 3. values
  float acc[GP][D32];
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) acc[g][i] = 0.0f;
  if constexpr (kTurbo) {
    WithValueRunWidth(runs ? m.value_bits : 0, [&]<int B>() {
      TurboValues<D32, GP, B>(m, v_region, v_part, j0, nk, e0, st.centroids, codebook, sc, acc);
    });
  } else if constexpr (kVShared) {
#pragma unroll
    for (int jj = 0; jj < kKeysPerWarp; ++jj) {
      const int j = j0 + jj;
      if (j >= nk) break;
      float vv[D32];
      ReadSlice<D32>(v_region, j, lane, bf16, vv);
      AccumulateValue<D32, GP>(sc, j, vv, acc);
    }
  } else {
    const int64_t v_off = st.f.v_codes + slice_off + static_cast<int64_t>(e0) * 2;
#pragma unroll
    for (int jb = 0; jb < kKeysPerWarp; jb += KB) {
      float vv[KB][D32];
#pragma unroll
      for (int jj = 0; jj < KB; ++jj) {
        const uint8_t* rec = TileRecord(my_rec, jb + jj);
        if (rec != nullptr) {
          LoadPlain2<D32>(rec + v_off, bf16, vv[jj]);
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
  }
  // The warps' sums, added in warp order (the key area is free: every
  // warp passed the barrier after its scores).
  StoreSplitState<D32, GP>(a, r_local, kh, split, g0, gn, acc, stats, red, warp, lane);
}

template <int D32, int GP, int kLayout, int kMinBlocks>
void Launch(const dim3& grid, const AttnParams& a, int head_groups, int group_heads, cudaStream_t stream) {
  // Per-key bytes: the largest over the stores in use (a step may mix two
  // turbo formats).
  int k_part = StreamShape<D32>::kSliceBytes, v_part = StreamShape<D32>::kSliceBytes;
  int codebook = 0;  // floats
  StreamSmem layout;
  if (kLayout == kStreamTurbo) {
    k_part = v_part = 0;
    for (const AttnStore& st : a.store) {
      if (st.records == nullptr) continue;
      const TurboHeadBytes hb = TurboHeadBytesOf(st.f);
      k_part = std::max(k_part, hb.key_part());
      v_part = std::max(v_part, hb.value_part());
      codebook = std::max(codebook, 1 << st.f.value_bits);
    }
    static const bool lane_runs = EnvSwitchOn("G4_CUDA_ATTN_TURBO_RUNS");
    layout.lane_runs = lane_runs;
    if (!lane_runs) codebook = 0;
  }
  const int red_bytes = static_cast<int>(kWarps * GP * 32 * D32 * sizeof(float));
  layout.k_region = std::max(kSplitKeys * k_part, red_bytes);
  layout.v_region = kLayout == kStreamPlainKeys ? 0 : kSplitKeys * v_part;
  const size_t smem = static_cast<size_t>(layout.k_region) + layout.v_region +
                      (static_cast<size_t>(GP) * kSplitKeys + 2 * GP + codebook) * sizeof(float);
  static size_t allowed = 48 * 1024;  // raised once per new maximum, never inside a capture
  if (smem > allowed) {
    G4_CUDA_CHECK(cudaFuncSetAttribute(StreamSplitKernel<D32, GP, kLayout, kMinBlocks>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    // The most shared memory the SM allows, so kMinBlocks blocks of ~50 KB fit.
    G4_CUDA_CHECK(cudaFuncSetAttribute(StreamSplitKernel<D32, GP, kLayout, kMinBlocks>,
                                       cudaFuncAttributePreferredSharedMemoryCarveout,
                                       cudaSharedmemCarveoutMaxShared));
    allowed = smem;
  }
  LaunchDependent(StreamSplitKernel<D32, GP, kLayout, kMinBlocks>, grid, dim3(kThreads), smem, stream, a, head_groups,
                  group_heads, layout);
}

// Blocks per SM the turbo kernel is built for: 3 (its registers capped at
// 80, none spill), or 2 with G4_CUDA_ATTN_TURBO_OCC=0, as the plain
// layouts (whose values kept in registers would spill at 80).
bool TurboThreeBlocks() {
  static const bool on = EnvSwitchOn("G4_CUDA_ATTN_TURBO_OCC");
  return on;
}

template <int D32, int kLayout, int kMinBlocks>
void LaunchB(bool narrow, const dim3& grid, const AttnParams& a, int head_groups, int group_heads,
             cudaStream_t stream) {
  if (narrow) return Launch<D32, 1, kLayout, kMinBlocks>(grid, a, head_groups, group_heads, stream);
  return Launch<D32, WideHeads(D32), kLayout, kMinBlocks>(grid, a, head_groups, group_heads, stream);
}

template <int D32, int kLayout>
void LaunchL(bool narrow, const dim3& grid, const AttnParams& a, int head_groups, int group_heads,
             cudaStream_t stream) {
  if constexpr (kLayout == kStreamTurbo) {
    if (TurboThreeBlocks()) return LaunchB<D32, kLayout, 3>(narrow, grid, a, head_groups, group_heads, stream);
  }
  return LaunchB<D32, kLayout, 2>(narrow, grid, a, head_groups, group_heads, stream);
}

template <int D32>
void LaunchD(int layout, bool narrow, const dim3& grid, const AttnParams& a, int head_groups, int group_heads,
             cudaStream_t stream) {
  switch (layout) {
    case kStreamPlainKeysValues:
      return LaunchL<D32, kStreamPlainKeysValues>(narrow, grid, a, head_groups, group_heads, stream);
    case kStreamPlainKeys:
      return LaunchL<D32, kStreamPlainKeys>(narrow, grid, a, head_groups, group_heads, stream);
    default:
      return LaunchL<D32, kStreamTurbo>(narrow, grid, a, head_groups, group_heads, stream);
  }
}

// Whether every store in use is a turbo store whose head parts are whole
// 16-byte pieces at 16-byte aligned addresses.
bool TurboStreamable(const AttnParams& a) {
  bool any = false;
  for (const AttnStore& st : a.store) {
    if (st.records == nullptr) continue;
    const DevKvFormat& f = st.f;
    if (f.kind != kKvTurbo) return false;
    const TurboHeadBytes hb = TurboHeadBytesOf(f);
    for (int64_t v : {f.record_bytes, f.k_codes, f.k_scales, f.k_biases, f.v_codes, f.v_scales,
                      static_cast<int64_t>(hb.key_codes), static_cast<int64_t>(hb.plane),
                      static_cast<int64_t>(hb.value_codes)})
      if (v % 16 != 0) return false;
    if (reinterpret_cast<uintptr_t>(st.records) % 16 != 0 || f.head_dim != a.d) return false;
    any = true;
  }
  return any;
}

// Whether every store in use is plain 2-byte with vec slices.
bool PlainStreamable(const AttnParams& a) {
  bool any = false;
  for (const AttnStore& st : a.store) {
    if (st.records == nullptr) continue;
    if (!st.vec || st.f.plain_bytes != 2) return false;
    any = true;
  }
  return any;
}

}  // namespace

int StreamMode() {
  const char* e = std::getenv("G4_CUDA_ATTN_STREAM");  // read at every call: tests switch it
  if (e == nullptr || *e == '\0') return kStreamAuto;
  const int v = std::atoi(e);
  return v == kStreamOff || v == kStreamKeysAndValues || v == kStreamKeys ? v : kStreamAuto;
}

int StreamLayoutFor(const AttnParams& a, int d32, int mode) {
  if (mode == kStreamOff || (d32 != 8 && d32 != 16) || a.d != 32 * d32) return kStreamNone;
  if (TurboStreamable(a)) return kStreamTurbo;
  if (!PlainStreamable(a)) return kStreamNone;
  // Automatic: plain values in shared memory too where a block then needs
  // at most 64 KB for both (head_dim 256: three blocks per SM); at 512 the
  // keys alone take 64 KB and the values come through L2.
  const bool values = mode == kStreamKeysAndValues || (mode != kStreamKeys && d32 == 8);
  return values ? kStreamPlainKeysValues : kStreamPlainKeys;
}

void LaunchStreamSplit(const AttnParams& a, int d32, int layout, bool narrow, const dim3& grid, int head_groups,
                       int group_heads, cudaStream_t stream) {
  if (d32 == 8) return LaunchD<8>(layout, narrow, grid, a, head_groups, group_heads, stream);
  return LaunchD<16>(layout, narrow, grid, a, head_groups, group_heads, stream);
}

}  // namespace g4::cuda::attn
