// Shadow of backend/cuda/pdl.cuh for the SIMT emulator: a dependent launch
// runs the grid at once, so waiting for the predecessor is a no-op.
// Test-only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace g4::cuda {

inline void WaitForPredecessor() {}
inline void AllowDependents() {}
inline void FollowPredecessor() {}

template <typename... Params, typename... Args>
void LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t,
                     Args&&... args) {
  simt::Launch(kernel, grid, block, smem, std::forward<Args>(args)...);
}

}  // namespace g4::cuda
