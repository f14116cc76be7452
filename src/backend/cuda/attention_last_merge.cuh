// The merge of a row's split states (MergeKernel in paged_attention.cu) run
// inside the kernel that computes the states, by whichever of the row's
// split blocks finishes last: the tensor-core row kernel
// (paged_attention_mma.cu) takes it for steps of few splits, which saves
// the merge's launch and its wait for the whole grid. The float operations
// and their order are MergeKernel's (the largest split maximum; per split
// in order, skipping a split with no visible key: c = exp(m_s - max),
// l = l + l_s * c, acc = fma(c, acc_s, acc); out = acc * (l > 0 ? 1 / l :
// 0)), so the output has its bits. Plain stores only: TurboQuant's inverse
// rotation stays in MergeKernel. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_common.cuh"
#include "backend/cuda/paged_attention_core.cuh"

namespace g4::cuda::attn {

constexpr int kLastMergeMaxSplits = 32;  // a row's splits: one lane each
constexpr int kLastMergeMaxHeads = 16;   // query heads per block
// Floats of shared memory MergeInLastBlock borrows.
constexpr int kLastMergeScratchFloats = 3 * kLastMergeMaxHeads * kLastMergeMaxSplits + kLastMergeMaxHeads;

// Called by every thread of a split block once its states are written
// (after its last use of `scratch`). `count` is the block's counter, one per
// (row, KV head, head group), zero before the launch; each block of the
// grid's x extent (every split of the row, with keys or not) adds one. The
// block that arrives last merges query heads g0 .. g0 + gn - 1 of KV head kh
// for row r_local of the launch into a.out, reading the others' states
// through L2, and puts the counter back to zero for the next launch.
__device__ inline void MergeInLastBlock(const AttnParams& a, int64_t r_local, int kh, int g0, int gn, int* count,
                                        float* scratch) {
  __shared__ int last;
  __threadfence();  // this thread's state stores, before the block counts itself
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(count, 1) == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other block counted itself after its stores
  const RowInfo ri = ReadRow(a, a.row0 + r_local);
  const int splits = ri.pos / kSplitKeys - ri.lo / kSplitKeys + 1;
  if (splits > kLastMergeMaxSplits || gn > kLastMergeMaxHeads) __trap();
  constexpr int kS = kLastMergeMaxSplits;
  const int G = a.group, d = a.d;
  const int64_t state = StateFloats(a);
  const float* base = a.partial + (r_local * a.kv_heads + kh) * a.splits_max * state;
  float* ms = scratch;                                 // [head][split]: m_s
  float* cs = scratch + kLastMergeMaxHeads * kS;       // [head][split]: exp(m_s - max)
  float* ls = scratch + 2 * kLastMergeMaxHeads * kS;   // [head][split]: l_s
  float* inv = scratch + 3 * kLastMergeMaxHeads * kS;  // [head]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // Per head, one warp: lane s holds split s.
  for (int j = warp; j < gn; j += warps) {
    const int g = g0 + j;
    const float m = lane < splits ? __ldcg(base + lane * state + g) : -INFINITY;
    const float mx = WarpMax(m);  // fmaxf in any order: the fold's value (no split maximum is -0)
    ms[j * kS + lane] = m;
    cs[j * kS + lane] = m == -INFINITY ? 0.0f : expf(m - mx);
    ls[j * kS + lane] = lane < splits ? __ldcg(base + lane * state + G + g) : 0.0f;
  }
  __syncthreads();
  if (threadIdx.x < gn) {  // l over the splits in order, a thread per head
    const int j = threadIdx.x;
    float l = 0.0f;
    for (int s = 0; s < splits; ++s)
      if (ms[j * kS + s] != -INFINITY) l = l + ls[j * kS + s] * cs[j * kS + s];
    inv[j] = l > 0 ? 1.0f / l : 0.0f;
  }
  __syncthreads();
  // Four consecutive elements of one head a thread, eight splits' values
  // requested at a time.
  const int quads = d / 4;
  for (int i = threadIdx.x; i < gn * quads; i += blockDim.x) {
    const int j = i / quads, e = (i - j * quads) * 4;
    const float* av = base + 2 * G + static_cast<int64_t>(g0 + j) * d + e;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s0 = 0; s0 < splits; s0 += 8) {
      float v[8][4];
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const float* p = av + static_cast<int64_t>(s0 + b < splits ? s0 + b : 0) * state;
        if (a.state_vec) {
          const float4 x = __ldcg(reinterpret_cast<const float4*>(p));
          v[b][0] = x.x, v[b][1] = x.y, v[b][2] = x.z, v[b][3] = x.w;
        } else {
#pragma unroll
          for (int k = 0; k < 4; ++k) v[b][k] = __ldcg(p + k);
        }
      }
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const int s = s0 + b;
        if (s >= splits || ms[j * kS + s] == -INFINITY) continue;
        const float c = cs[j * kS + s];
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[k] = __fmaf_rn(c, v[b][k], acc[k]);
      }
    }
    float* out = a.out + (a.row0 + r_local) * a.ldo + static_cast<int64_t>(kh * G + g0 + j) * d + e;
#pragma unroll
    for (int k = 0; k < 4; ++k) out[k] = acc[k] * inv[j];
  }
  if (threadIdx.x == 0) *count = 0;
}

}  // namespace g4::cuda::attn
