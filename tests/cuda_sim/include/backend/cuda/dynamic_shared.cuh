// Shadow of src/backend/cuda/dynamic_shared.cuh for the SIMT emulator: the
// emulated block's dynamic shared memory. Test-only.
#pragma once

#include <cstdint>

#include "simt.h"

namespace g4::cuda {

inline uint8_t* DynamicShared() { return simt::CurrentBlock()->dynamic_smem.data(); }

}  // namespace g4::cuda
