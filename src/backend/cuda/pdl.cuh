// Programmatic dependent launch (sm_90), the way every kernel of a decode
// step is chained: a kernel launched with LaunchDependent may start once
// every block of its predecessor in the stream has exited or called
// AllowDependents, so its launch and its first instructions overlap the
// predecessor's tail. Its contract:
//  - it must WaitForPredecessor (the predecessor complete, its writes
//    visible) before it reads anything a kernel of this step wrote, and
//    before it writes anything; before that it may only read what no
//    kernel of the step writes (weights, the step's uploaded arrays);
//  - it calls AllowDependents only after its own wait (so when its
//    dependent starts, the kernel before it is complete: the order stays
//    transitive), unless its dependent reads nothing before waiting but
//    weights (QuantizeKernel before the one-row MatMul).
// Both are no-ops in a kernel launched plainly. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace g4::cuda {

__device__ __forceinline__ void WaitForPredecessor() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void AllowDependents() { asm volatile("griddepcontrol.launch_dependents;"); }
// The usual start of a dependent kernel: wait, then let the next launch.
__device__ __forceinline__ void FollowPredecessor() {
  WaitForPredecessor();
  AllowDependents();
}

template <typename... Params, typename... Args>
void LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                     Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  G4_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace g4::cuda
