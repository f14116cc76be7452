// Input rows quantized on the SIMT emulator by QuantizeGroup, a group per
// warp as QuantizeRows' kernel does: the reference for the kernels that
// quantize inputs themselves. Test-only.
#pragma once

#include <cstdint>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/quantize_group.cuh"

namespace g4::cuda::sim {

// The groups of one row x (gated: gelu_tanh(x) * u) into q, d and xs.
__global__ inline void QuantizeByWarps(const float* x, const float* u, int groups, int group, int bits, int8_t* q,
                                       float* d, float* xs) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  for (int g = warp; g < groups; g += static_cast<int>(blockDim.x >> 5))
    QuantizeGroup(x + g * group, u ? u + g * group : nullptr, group, bits, g, lane, q, d + g, xs + g);
}

// Row m of qr from the float row x of `cols` columns (gated: with u).
inline void QuantizeRowInto(const QRows& qr, int64_t m, const float* x, const float* u, int64_t cols, int group,
                            int bits) {
  simt::Launch(QuantizeByWarps, dim3(1), dim3(256), 0, x, u, static_cast<int>(cols / group), group, bits,
               qr.q + m * qr.ldq, qr.d + m * qr.ldg, qr.xs + m * qr.ldg);
}

}  // namespace g4::cuda::sim
