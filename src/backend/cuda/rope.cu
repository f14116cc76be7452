// Rotate-half RoPE (rope.cuh's arithmetic): one thread per (row, head,
// pair).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rope.cuh"

namespace g4::cuda {
namespace {

__global__ void RopeKernel(float* x, int64_t ldx, int64_t rows, int heads, int head_dim,
                           const int32_t* __restrict__ positions, const float* __restrict__ inv_freq) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const int half = head_dim / 2;
  const int64_t per_row = static_cast<int64_t>(heads) * half;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= rows * per_row) return;
  const int64_t t = idx / per_row, rest = idx % per_row;
  const int h = static_cast<int>(rest / half), i = static_cast<int>(rest % half);
  float* x1 = x + t * ldx + static_cast<int64_t>(h) * head_dim + i;
  float* x2 = x1 + half;
  float a = *x1, b = *x2;
  RotatePair(a, b, positions[t], inv_freq[i]);
  *x1 = a;
  *x2 = b;
}

}  // namespace

void Rope(const TensorView& x, int heads, int head_dim, const int32_t* positions, const float* inv_freq,
          cudaStream_t stream) {
  const int64_t n = x.rows * heads * (head_dim / 2);
  if (n == 0) return;
  const int64_t ldx = x.pitch();
  LaunchDependent(RopeKernel, dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0, stream, x.f32(),
                  ldx, x.rows, heads, head_dim, positions, inv_freq);
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
