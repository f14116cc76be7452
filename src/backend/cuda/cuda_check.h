// CUDA error checks for host code of the CUDA backend. A failing CUDA call
// that is not an allocation is a g4 bug or a lost device: it stops the
// process with the CUDA error string (G4_CHECK semantics).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace g4::cuda {

[[noreturn]] inline void CudaFailed(const char* file, int line, const char* expr, cudaError_t e) {
  std::fprintf(stderr, "g4: CUDA call failed at %s:%d: %s: %s (%s)\n", file, line, expr, cudaGetErrorString(e),
               cudaGetErrorName(e));
  std::abort();
}

}  // namespace g4::cuda

#define G4_CUDA_CHECK(expr)                                                   \
  do {                                                                        \
    const cudaError_t g4_cuda_err_ = (expr);                                  \
    if (g4_cuda_err_ != cudaSuccess) ::g4::cuda::CudaFailed(__FILE__, __LINE__, #expr, g4_cuda_err_); \
  } while (0)

// After a kernel launch: a launch configuration error shows up here.
#define G4_CUDA_LAUNCHED() G4_CUDA_CHECK(cudaGetLastError())
