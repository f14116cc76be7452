// The backend that model- and engine-level tests run on: the CPU backend,
// or the CUDA backend when the environment says G4_TEST_BACKEND=cuda (in a
// build with it; scripts/gpu-run.sh sets it on the GPU machine). Op-level
// tests (tests/backend) run every registered backend regardless.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#ifdef G4_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace g4::testing {

inline std::string TestBackendName() {
  const char* env = std::getenv("G4_TEST_BACKEND");
  return env && *env ? std::string(env) : std::string("cpu");
}

inline std::unique_ptr<Backend> MakeTestBackend() {
#ifdef G4_WITH_CUDA
  if (TestBackendName() == "cuda" && CudaDeviceAvailable()) return MakeCudaBackend();
#endif
  return MakeCpuBackend();
}

}  // namespace g4::testing
