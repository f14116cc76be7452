// Shadow of backend/cuda/prefetch.cuh for the SIMT emulator: a prefetch
// changes no result, so it is a no-op. Test-only.
#pragma once

namespace g4::cuda {

inline void PrefetchL1(const void*) {}

}  // namespace g4::cuda
