#include "backend_registry.h"

#include "backend/cpu/cpu_backend.h"

namespace g4::testing {

const std::vector<BackendFactory>& RegisteredBackends() {
  static const std::vector<BackendFactory> kBackends = {
      {"cpu", &MakeCpuBackend},
      // #ifdef G4_WITH_CUDA: {"cuda", &MakeCudaBackend},
  };
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
