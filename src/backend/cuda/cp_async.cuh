// Asynchronous copies from global to shared memory (sm_80+ cp.async): a
// thread's copies are grouped by CpAsyncCommit, and CpAsyncWait<N> returns
// once at most N of the thread's groups are still in flight. A copy lands
// for the issuing thread only: other threads may read it after the wait and
// a block barrier. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

namespace g4::cuda {

// 16 bytes, both addresses 16-byte aligned; cached in L2 only.
__device__ __forceinline__ void CpAsync16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
}
// 4 bytes, both addresses 4-byte aligned.
__device__ __forceinline__ void CpAsync4(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Requests the 128-byte line at p into L2 (a hint: nothing waits for it).
__device__ __forceinline__ void PrefetchL2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace g4::cuda
