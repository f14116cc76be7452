// Shadow of backend/cuda/dp4a.cuh for the SIMT emulator: the u8 x s8
// four-way dot product, exact in 32-bit integers as the instruction's.
// Test-only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace g4::cuda {

inline int Dp4a(uint32_t a, uint32_t b, int acc) {
  for (int i = 0; i < 4; ++i)
    acc += static_cast<int>((a >> (8 * i)) & 0xffu) * static_cast<int>(static_cast<int8_t>((b >> (8 * i)) & 0xffu));
  return acc;
}

}  // namespace g4::cuda
