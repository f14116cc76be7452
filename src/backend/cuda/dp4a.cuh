// The u8 x s8 four-way dot product instruction, in its own header so that
// the SIMT emulator (tests/cuda_sim/include) can stand in for it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace g4::cuda {

// acc + the four products of u8 codes (a) and s8 inputs (b).
__device__ __forceinline__ int Dp4a(uint32_t a, uint32_t b, int acc) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(acc));
  return d;
}

}  // namespace g4::cuda
