// Properties of the current device that launches size themselves by, read
// once per process (the backend uses one device). Host code only.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace g4::cuda {

// The number of streaming multiprocessors.
inline int SmCount() {
  static const int sms = [] {
    int dev = 0, n = 0;
    G4_CUDA_CHECK(cudaGetDevice(&dev));
    G4_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

}  // namespace g4::cuda
