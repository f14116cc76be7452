// The CPU backend: host memory is device memory, every op runs to
// completion on the calling thread's worker team before it returns (so Sync
// has nothing to wait for), and weights stay where the checkpoint mapping
// put them.
//
// Kernels: one build carries three variants of every kernel (isa.h) and the
// backend picks one when it is made: the best this CPU and OS support, or
// the one the environment variable G4_CPU names (avx512, avx2, baseline;
// one the CPU cannot run is refused with a warning on stderr and the best
// supported one below it is used). Describe() says which was picked.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace g4 {

enum class CpuKernels { kAuto, kBaseline, kAvx2, kAvx512 };

// "auto", "baseline", "avx2", "avx512".
const char* CpuKernelsName(CpuKernels k);
// Whether this CPU and OS can run variant k (kAuto and kBaseline: always).
bool CpuKernelsSupported(CpuKernels k);
// The variant kAuto picks: G4_CPU if set and supported, else the best
// supported one (see above). Never kAuto.
CpuKernels AutoCpuKernels();

// REQUIRES: CpuKernelsSupported(kernels).
std::unique_ptr<Backend> MakeCpuBackend(CpuKernels kernels = CpuKernels::kAuto);

}  // namespace g4
