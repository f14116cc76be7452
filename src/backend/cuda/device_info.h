// Properties of the current device that launches size themselves by, read
// once per process (the backend uses one device). Host code only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

// Blocks resident at once at `per_sm` resident blocks an SM.
inline int64_t ResidentSlots(int per_sm) { return int64_t{per_sm} * SmCount(); }

// Waves a launch of `blocks` blocks takes at `per_sm` resident blocks an SM.
inline int64_t Waves(int64_t blocks, int per_sm) {
  const int64_t slots = ResidentSlots(per_sm);
  return (blocks + slots - 1) / slots;
}

}  // namespace g4::cuda
