// The attention inputs' head norms and RoPE (ops.h HeadNormRope) in one
// launch: one warp per (row, head) of q, k and v. Lane l holds columns l,
// l + 32, ... of its head in registers, so the norm is RmsNorm's narrow-row
// order (row_norm.cuh: the lane's chain in column order, then the warp
// butterfly) and the rotation is rope.cuh's: the plain ops' bits. Pair
// (i, i + D/2) lies in one lane when D/2 is a multiple of 32; at D = 32
// lanes l and l + 16 trade halves. Other head sizes run the plain ops.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/row_norm.cuh"

namespace g4::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

struct HeadPart {
  float* x = nullptr;
  int64_t ld = 0;
  int heads = 0;
  const float* weight = nullptr;
  bool rope = false;
};
struct HeadParts {
  HeadPart p[3];
  int heads_total = 0;
};

// kPerLane = head_dim / 32.
template <int kPerLane>
__global__ __launch_bounds__(kWarpsPerBlock * 32) void HeadNormRopeKernel(HeadParts parts, int64_t rows,
                                                                          const int32_t* __restrict__ positions,
                                                                          const float* __restrict__ inv_freq,
                                                                          float eps) {
  constexpr int D = kPerLane * 32;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (gw >= rows * parts.heads_total) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t t = gw / parts.heads_total;
  int h = static_cast<int>(gw % parts.heads_total);
  HeadPart part = parts.p[0];  // constant indices: the parameters stay in their bank
  if (h >= parts.p[0].heads) {
    h -= parts.p[0].heads;
    part = parts.p[1];
    if (h >= parts.p[1].heads) {
      h -= parts.p[1].heads;
      part = parts.p[2];
    }
  }
  float* xr = part.x + t * part.ld + static_cast<int64_t>(h) * D;
  // The norm weights and frequencies are weights: read before the wait
  // (pdl.cuh), so their latency overlaps the previous kernel's tail.
  constexpr int kPairs = kPerLane == 1 ? 1 : kPerLane / 2;
  float w[kPerLane], freq[kPairs] = {};
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) w[i] = part.weight ? part.weight[lane + 32 * i] : 1.0f;
  if (part.rope) {
#pragma unroll
    for (int i = 0; i < kPairs; ++i) freq[i] = inv_freq[kPerLane == 1 ? (lane & 15) : lane + 32 * i];
  }
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  float v[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) v[i] = xr[lane + 32 * i];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) ss = __fmaf_rn(v[i], v[i], ss);
  const float inv = InvRms(RowTotal<32>(ss, nullptr), D, eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const float y = v[i] * inv;
    v[i] = part.weight ? y * w[i] : y;
  }
  if (part.rope) {
    const int32_t pos = positions[t];
    if constexpr (kPerLane == 1) {
      const float other = __shfl_xor_sync(0xffffffffu, v[0], 16);
      const bool first = lane < 16;
      float a = first ? v[0] : other, b = first ? other : v[0];
      RotatePair(a, b, pos, freq[0]);
      v[0] = first ? a : b;
    } else {
#pragma unroll
      for (int i = 0; i < kPerLane / 2; ++i)
        RotatePair(v[i], v[i + kPerLane / 2], pos, freq[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) xr[lane + 32 * i] = v[i];
}

template <int kPerLane>
void Launch(const HeadParts& parts, int64_t rows, const HeadNormRopeArgs& a, cudaStream_t stream) {
  const int64_t warps = rows * parts.heads_total;
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  LaunchDependent(HeadNormRopeKernel<kPerLane>, dim3(static_cast<unsigned>(blocks)),
                  dim3(kWarpsPerBlock * 32), 0, stream, parts, rows, a.positions, a.inv_freq, a.eps);
  G4_CUDA_LAUNCHED();
}

}  // namespace

void HeadNormRope(const HeadNormRopeArgs& a, cudaStream_t stream) {
  const int64_t T = a.q.rows;
  const int D = a.head_dim;
  if (T == 0) return;
  HeadParts parts;
  int n = 0;
  parts.p[n++] = HeadPart{a.q.f32(), a.q.pitch(), a.q_heads, a.q_weight, true};
  if (a.k.data != nullptr) parts.p[n++] = HeadPart{a.k.f32(), a.k.pitch(), a.kv_heads, a.k_weight, true};
  if (a.v.data != nullptr) parts.p[n++] = HeadPart{a.v.f32(), a.v.pitch(), a.kv_heads, nullptr, false};
  for (int i = 0; i < n; ++i) parts.heads_total += parts.p[i].heads;
  switch (D) {
    case 32:
      return Launch<1>(parts, T, a, stream);
    case 64:
      return Launch<2>(parts, T, a, stream);
    case 128:
      return Launch<4>(parts, T, a, stream);
    case 256:
      return Launch<8>(parts, T, a, stream);
    case 512:
      return Launch<16>(parts, T, a, stream);
    default:
      break;
  }
  // The plain ops.
  const auto norm = [&](const TensorView& x, int heads, const float* weight) {
    const TensorView h = x.Reshape(T * heads, D);
    RmsNorm(h, weight, a.eps, h, stream);
  };
  norm(a.q, a.q_heads, a.q_weight);
  Rope(a.q, a.q_heads, D, a.positions, a.inv_freq, stream);
  if (a.k.data != nullptr) {
    norm(a.k, a.kv_heads, a.k_weight);
    Rope(a.k, a.kv_heads, D, a.positions, a.inv_freq, stream);
  }
  if (a.v.data != nullptr) norm(a.v, a.kv_heads, nullptr);
}

}  // namespace g4::cuda
