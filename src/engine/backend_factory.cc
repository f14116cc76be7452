#include "engine/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#ifdef G4_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace g4 {

StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name) {
  if (name == "cpu") return MakeCpuBackend();
#ifdef G4_WITH_CUDA
  if (name == "cuda" || name == "auto") {
    if (CudaDeviceAvailable()) return MakeCudaBackend();
    if (name == "cuda") return Unsupported("[backend] --backend cuda: no CUDA device is available");
    return MakeCpuBackend();
  }
#else
  if (name == "auto") return MakeCpuBackend();
  if (name == "cuda") return Unsupported("[backend] this build of g4 has no CUDA backend");
#endif
  return InvalidArgument("[backend] unknown backend '" + name + "' (cpu, cuda or auto)");
}

}  // namespace g4
