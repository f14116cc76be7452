// Rotate-half RoPE, numerically as HF computes it: the angle is the float32
// product float(pos) * inv_freq[i], then float32 cos and sin of that angle
// (CUDA's accurate sincosf, not the fast intrinsics). One thread per
// (row, head, pair); a zero frequency gives cos 1, sin 0: exact
// pass-through.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"

namespace g4::cuda {
namespace {

__global__ void RopeKernel(float* x, int64_t ldx, int64_t rows, int heads, int head_dim,
                           const int32_t* __restrict__ positions, const float* __restrict__ inv_freq) {
  const int half = head_dim / 2;
  const int64_t per_row = static_cast<int64_t>(heads) * half;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= rows * per_row) return;
  const int64_t t = idx / per_row, rest = idx % per_row;
  const int h = static_cast<int>(rest / half), i = static_cast<int>(rest % half);
  const float angle = static_cast<float>(positions[t]) * inv_freq[i];
  float s, c;
  sincosf(angle, &s, &c);
  float* x1 = x + t * ldx + static_cast<int64_t>(h) * head_dim + i;
  float* x2 = x1 + half;
  const float a = *x1, b = *x2;
  *x1 = a * c - b * s;
  *x2 = b * c + a * s;
}

}  // namespace

void Rope(const TensorView& x, int heads, int head_dim, const int32_t* positions, const float* inv_freq,
          cudaStream_t stream) {
  const int64_t n = x.rows * heads * (head_dim / 2);
  if (n == 0) return;
  const int64_t ldx = x.rows > 1 ? x.stride : x.cols;
  RopeKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x.f32(), ldx, x.rows, heads, head_dim,
                                                                          positions, inv_freq);
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
