// The block's dynamic shared memory, for every kernel that sizes it at
// launch: one declaration, so that the SIMT emulator (tests/cuda_sim)
// can stand in for it. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace g4::cuda {

// The block's dynamic shared memory (16-byte aligned).
__device__ __forceinline__ uint8_t* DynamicShared() {
  extern __shared__ __align__(16) uint8_t g4_dynamic_smem[];
  return g4_dynamic_smem;
}

}  // namespace g4::cuda
