#include "backend_registry.h"

#include "backend/cpu/cpu_backend.h"
#ifdef G4_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace g4::testing {

const std::vector<BackendFactory>& RegisteredBackends() {
  // "cuda" only where this build has it and a GPU is present (CI compiles
  // the CUDA backend on machines without one).
  static const std::vector<BackendFactory> kBackends = [] {
    std::vector<BackendFactory> b = {{"cpu", &MakeCpuBackend}};
#ifdef G4_WITH_CUDA
    if (CudaDeviceAvailable()) b.push_back({"cuda", &MakeCudaBackend});
#endif
    return b;
  }();
  return kBackends;
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (const BackendFactory& f : RegisteredBackends()) names.push_back(f.name);
  return names;
}

std::unique_ptr<Backend> MakeBackend(const std::string& name) {
  for (const BackendFactory& f : RegisteredBackends()) {
    if (f.name == name) return f.make();
  }
  ADD_FAILURE() << "no backend named " << name;
  return nullptr;
}

}  // namespace g4::testing
