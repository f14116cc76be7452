// The CPU backend: host memory is device memory, every op runs to
// completion on the calling thread's OpenMP team before it returns (so Sync
// has nothing to wait for), and weights stay where the checkpoint mapping
// put them.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace g4 {

std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace g4
