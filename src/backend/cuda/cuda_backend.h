// The CUDA backend: device memory from cudaMalloc (never managed memory),
// one stream on which every copy and op is queued in issue order, weights
// uploaded once still packed (backend.h PlaceWeights), and the ops of
// cuda_ops.cc. Built only when CMake finds nvcc (G4_WITH_CUDA).
//
// Errors: running out of device memory is a ResourceExhausted Status from
// Allocate / PlaceWeights; any other CUDA error is a bug or a dead device
// and stops the process through G4_CHECK with the CUDA error string.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace g4 {

// Whether a CUDA device is usable by this process (a driver and at least one
// GPU). Cheap after the first call.
bool CudaDeviceAvailable();

// REQUIRES: CudaDeviceAvailable().
std::unique_ptr<Backend> MakeCudaBackend();

}  // namespace g4
