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
// Plain 2-byte stores (bf16, f16) whose head slices are 16-byte aligned and
// fill the lanes (AttnStore::vec) at head_dim 256 and 512 only; the dispatch
// in paged_attention.cu keeps the split kernel for everything else. Shared
// memory holds a key's slice as [piece][lane] 16-byte pieces (a lane's D32
// elements are D32 / 8 pieces), so a warp's read of one piece is 512
// contiguous bytes, free of bank conflicts.
#include <cstdlib>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/paged_attention_core.cuh"
#include "backend/cuda/pdl.cuh"

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
  static constexpr int kRegionBytes = kSplitKeys * kSliceBytes;  // a split's keys (or values)
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

template <int D32, bool kVShared>
constexpr size_t StreamSmemBytes(int gp) {
  return static_cast<size_t>(kVShared ? 2 : 1) * StreamShape<D32>::kRegionBytes +
         (static_cast<size_t>(gp) * kSplitKeys + 2 * gp) * sizeof(float);
}

// The split kernel (SplitKernel in paged_attention.cu) with the keys, and
// with kVShared the values, copied into shared memory first. Without
// kVShared each warp loads its keys' value slices from global memory (in
// L2 by then: requested before the dependent wait) KB at a time as the
// split kernel does. The block's work, the lanes' element slices, every
// float operation and its order are the split kernel's.
template <int D32, int GP, bool kVShared>
__global__ __launch_bounds__(kThreads, 2) void StreamSplitKernel(AttnParams a, int head_groups, int group_heads) {
  using S = StreamShape<D32>;
  constexpr int KB = D32 <= 8 ? kKeysPerWarp : kKeysPerWarp / 2;  // value slices loaded at once (global)
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* k_region = smem;
  uint8_t* v_region = smem + S::kRegionBytes;  // with kVShared
  float* sc = reinterpret_cast<float*>(smem + (kVShared ? 2 : 1) * S::kRegionBytes);  // [GP][kSplitKeys]
  float* stats = sc + GP * kSplitKeys;                                                 // [2][GP]: m, l
  float* red = reinterpret_cast<float*>(k_region);  // [kWarps][GP][32 * D32], once every key is read
  static_assert(kWarps * GP * 32 * D32 * sizeof(float) <= S::kRegionBytes, "the warps' sums fit the key area");

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r_local = blockIdx.z, r = a.row0 + r_local;
  const int kh = blockIdx.y;
  const int split = blockIdx.x / head_groups, hg = blockIdx.x % head_groups;
  const RowInfo ri = ReadRow(a, r);
  const int64_t my = ri.lo / kSplitKeys + split;
  if (my * kSplitKeys > ri.pos) return;  // the row has fewer splits (the whole block)
  if (TiledSeq(a, ri.seq)) {              // the query-tiled kernel's row (see SplitKernel)
    WaitForPredecessor();
    return;
  }
  const int64_t k_begin = max(static_cast<int64_t>(ri.lo), my * kSplitKeys);
  const int64_t k_end = min(static_cast<int64_t>(ri.pos) + 1, (my + 1) * kSplitKeys);
  const int nk = static_cast<int>(k_end - k_begin);
  const AttnStore st = ri.store == 0 ? a.store[0] : a.store[1];
  if (st.records == nullptr) __trap();
  const int G = a.group, d = a.d, g0 = hg * group_heads;
  const int gn = min(group_heads, G - g0);
  const int e0 = lane * D32;
  const int64_t slice_off = static_cast<int64_t>(kh) * d * 2;  // head kh's slice in a K or V code array
  const bool bf16 = st.f.plain_bf16;

  // Thread t copies key t / 4's slices; its lines go to L2 before the wait.
  const int cj = threadIdx.x / kCopyThreadsPerKey, sub = threadIdx.x % kCopyThreadsPerKey;
  const uint8_t* copy_rec =
      cj < nk ? Record(a, st, ri.seq, static_cast<int32_t>(k_begin + cj)) : nullptr;
  const uint8_t* k_src = copy_rec != nullptr ? copy_rec + st.f.k_codes + slice_off : nullptr;
  const uint8_t* v_src = copy_rec != nullptr ? copy_rec + st.f.v_codes + slice_off : nullptr;
  if (copy_rec != nullptr) {
    for (int off = sub * kLine; off < S::kSliceBytes; off += kCopyThreadsPerKey * kLine) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(k_src + off));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(v_src + off));
    }
  }
  const int j0 = warp * kKeysPerWarp;  // the warp's first key in the split
  // Without kVShared: lane j < 8 holds the record of the warp's key j.
  const uint8_t* my_rec = !kVShared && lane < kKeysPerWarp && j0 + lane < nk
                              ? Record(a, st, ri.seq, static_cast<int32_t>(k_begin + j0 + lane))
                              : nullptr;
  // Up to here the kernel read only the step's uploaded arrays; q and the
  // records are written by this step's kernels.
  FollowPredecessor();
  if (k_src != nullptr) CopySlice<D32>(k_region, cj, k_src, sub);
  CpAsyncCommit();
  if constexpr (kVShared) {
    if (v_src != nullptr) CopySlice<D32>(v_region, cj, v_src, sub);
    CpAsyncCommit();
  }

  float q[GP][D32];
  const float* qrow = a.q + r * a.ldq + (static_cast<int64_t>(kh) * G + g0) * d;
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) q[g][i] = g < gn ? qrow[g * d + e0 + i] : 0.0f;

  if constexpr (kVShared) {
    CpAsyncWait<1>();  // this thread's key copies
  } else {
    CpAsyncWait<0>();
  }
  __syncthreads();  // everyone's
  // 1. scores (keys past nk were never copied: their score is -inf, as the
  // split kernel's)
#pragma unroll
  for (int jj = 0; jj < kKeysPerWarp; ++jj) {
    const int j = j0 + jj;
    if (j < nk) {
      float kv[D32];
      ReadSlice<D32>(k_region, j, lane, bf16, kv);
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < D32; ++i) part = __fmaf_rn(q[g][i], kv[i], part);
        const float s = WarpSum(part) * a.scale;
        if (lane == 0) sc[g * kSplitKeys + j] = s;
      }
    } else if (lane == 0) {
#pragma unroll
      for (int g = 0; g < GP; ++g) sc[g * kSplitKeys + j] = -INFINITY;
    }
  }
  __syncthreads();
  // 2. softmax statistics of the split, one warp per query head
  for (int g = warp; g < GP; g += kWarps) {
    const SplitSoftmax sm = SplitSoftmaxOf(sc[g * kSplitKeys + lane], sc[g * kSplitKeys + lane + 32], nk, lane);
    sc[g * kSplitKeys + lane] = sm.p0;
    sc[g * kSplitKeys + lane + 32] = sm.p1;
    const float l = WarpSum(sm.p0 + sm.p1);
    if (lane == 0) stats[g] = sm.m, stats[GP + g] = l;
  }
  if constexpr (kVShared) CpAsyncWait<0>();  // this thread's value copies
  __syncthreads();
  // 3. values
  float acc[GP][D32];
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) acc[g][i] = 0.0f;
  if constexpr (kVShared) {
#pragma unroll
    for (int jj = 0; jj < kKeysPerWarp; ++jj) {
      const int j = j0 + jj;
      if (j >= nk) break;
      float vv[D32];
      ReadSlice<D32>(v_region, j, lane, bf16, vv);
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        const float pj = sc[g * kSplitKeys + j];
#pragma unroll
        for (int i = 0; i < D32; ++i) acc[g][i] = __fmaf_rn(pj, vv[i], acc[g][i]);
      }
    }
  } else {
    const int64_t v_off = st.f.v_codes + slice_off + static_cast<int64_t>(e0) * 2;
#pragma unroll
    for (int jb = 0; jb < kKeysPerWarp; jb += KB) {
      float vv[KB][D32];
#pragma unroll
      for (int jj = 0; jj < KB; ++jj) {
        const uint8_t* rec = reinterpret_cast<const uint8_t*>(
            __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(my_rec), jb + jj));
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
#pragma unroll
        for (int g = 0; g < GP; ++g) {
          const float pj = sc[g * kSplitKeys + j0 + jb + jj];
#pragma unroll
          for (int i = 0; i < D32; ++i) acc[g][i] = __fmaf_rn(pj, vv[jj][i], acc[g][i]);
        }
      }
    }
  }
  // The warps' sums, added in warp order (the key area is free: every
  // warp passed the barrier after its scores).
  constexpr int kSlice = GP * 32 * D32;
#pragma unroll
  for (int g = 0; g < GP; ++g)
#pragma unroll
    for (int i = 0; i < D32; ++i) red[warp * kSlice + (g * 32 + lane) * D32 + i] = acc[g][i];
  __syncthreads();
  float* out = a.partial + ((r_local * a.kv_heads + kh) * a.splits_max + split) * StateFloats(a);
  for (int t = threadIdx.x; t < gn * d; t += kThreads) {
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

template <int D32, int GP, bool kVShared>
void Launch(const dim3& grid, const AttnParams& a, int head_groups, int group_heads, cudaStream_t stream) {
  constexpr size_t smem = StreamSmemBytes<D32, kVShared>(GP);
  static bool raised = false;  // once per instance, never inside a capture (the first step runs uncaptured)
  if (!raised && smem > 48 * 1024) {
    G4_CUDA_CHECK(cudaFuncSetAttribute(StreamSplitKernel<D32, GP, kVShared>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    raised = true;
  }
  LaunchDependent(StreamSplitKernel<D32, GP, kVShared>, grid, dim3(kThreads), smem, stream, a, head_groups,
                  group_heads);
}

template <int D32>
void LaunchD(bool narrow, bool v_shared, const dim3& grid, const AttnParams& a, int head_groups, int group_heads,
             cudaStream_t stream) {
  constexpr int kWide = WideHeads(D32);
  if (narrow) {
    return v_shared ? Launch<D32, 1, true>(grid, a, head_groups, group_heads, stream)
                    : Launch<D32, 1, false>(grid, a, head_groups, group_heads, stream);
  }
  return v_shared ? Launch<D32, kWide, true>(grid, a, head_groups, group_heads, stream)
                  : Launch<D32, kWide, false>(grid, a, head_groups, group_heads, stream);
}

}  // namespace

int StreamMode() {
  const char* e = std::getenv("G4_CUDA_ATTN_STREAM");  // read at every call: tests switch it
  if (e == nullptr || *e == '\0') return kStreamAuto;
  const int v = std::atoi(e);
  return v == kStreamOff || v == kStreamKeysAndValues || v == kStreamKeys ? v : kStreamAuto;
}

bool StreamFits(const AttnParams& a, int d32) {
  if ((d32 != 8 && d32 != 16) || a.d != 32 * d32) return false;
  bool any = false;
  for (const AttnStore& st : a.store) {
    if (st.records == nullptr) continue;
    if (!st.vec || st.f.plain_bytes != 2) return false;
    any = true;
  }
  return any;
}

void LaunchStreamSplit(const AttnParams& a, int d32, int mode, bool narrow, const dim3& grid, int head_groups,
                       int group_heads, cudaStream_t stream) {
  // Automatic: values in shared memory too where a block then needs at most
  // 64 KB for both (head_dim 256: three blocks per SM); at 512 the keys
  // alone take 64 KB and the values come through L2.
  const bool v_shared = mode == kStreamKeysAndValues || (mode != kStreamKeys && d32 == 8);
  if (d32 == 8) return LaunchD<8>(narrow, v_shared, grid, a, head_groups, group_heads, stream);
  return LaunchD<16>(narrow, v_shared, grid, a, head_groups, group_heads, stream);
}

}  // namespace g4::cuda::attn
