// One RoPE pair rotation, numerically as HF computes it, shared by every
// kernel that rotates (rope.cu, head_norm_rope.cu) so their bits agree: the
// angle is the float32 product float(pos) * inv_freq, then float32 cos and
// sin of it (CUDA's accurate sincosf, not the fast intrinsics); a zero
// frequency gives cos 1, sin 0: exact pass-through.
#pragma once

#include <cstdint>

namespace g4::cuda {

// (a, b) = (a cos - b sin, b cos + a sin), in place.
__device__ __forceinline__ void RotatePair(float& a, float& b, int32_t pos, float inv_freq) {
  const float angle = static_cast<float>(pos) * inv_freq;
  float s, c;
  sincosf(angle, &s, &c);
  const float x1 = a * c - b * s;
  const float x2 = b * c + a * s;
  a = x1;
  b = x2;
}

}  // namespace g4::cuda
