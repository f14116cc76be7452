// The Ops implementation of the CUDA backend (cuda_ops.cc), owned by
// CudaBackend. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "backend/backend.h"
#include "backend/ops.h"

namespace g4::cuda {

// Ops queued on `stream`; `backend` serves the host-side steps that need
// copies (SampleRows' host rows) and outlives the ops. `scratch_moved` is
// called when the ops reallocate their scratch memory (recordings that
// name the old buffers must go).
std::unique_ptr<Ops> MakeCudaOps(Backend& backend, cudaStream_t stream, std::function<void()> scratch_moved);

}  // namespace g4::cuda
