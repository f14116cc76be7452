// A prefetch of one global-memory line into L1 (`prefetch.global.L1`): a
// header of its own so that the SIMT emulator can stand in for it (there a
// no-op). Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

namespace g4::cuda {

__device__ __forceinline__ void PrefetchL1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

}  // namespace g4::cuda
