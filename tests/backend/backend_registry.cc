#include "backend_registry.h"

#include "backend/cpu/cpu_backend.h"
#ifdef G4_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace g4::testing {

namespace {

std::unique_ptr<Backend> MakeCpu() { return MakeCpuBackend(); }
std::unique_ptr<Backend> MakeCpuAvx512() { return MakeCpuBackend(CpuKernels::kAvx512); }
std::unique_ptr<Backend> MakeCpuAvx2() { return MakeCpuBackend(CpuKernels::kAvx2); }
std::unique_ptr<Backend> MakeCpuBaseline() { return MakeCpuBackend(CpuKernels::kBaseline); }

}  // namespace

const std::vector<BackendFactory>& RegisteredBackends() {
  static const std::vector<BackendFactory> kBackends = [] {
    // "cpu" is the variant the backend picks (G4_CPU or the best one); the
    // lesser kernel variants this machine can run are checked too, each by
    // the whole suite (a variant is compiled from the same source for
    // another instruction set, so each needs its own proof).
    std::vector<BackendFactory> b = {{"cpu", &MakeCpu}};
    const CpuKernels picked = AutoCpuKernels();
    const BackendFactory others[] = {{"cpu_avx512", &MakeCpuAvx512}, {"cpu_avx2", &MakeCpuAvx2},
                                     {"cpu_baseline", &MakeCpuBaseline}};
    const CpuKernels kinds[] = {CpuKernels::kAvx512, CpuKernels::kAvx2, CpuKernels::kBaseline};
    for (int i = 0; i < 3; ++i) {
      if (kinds[i] != picked && CpuKernelsSupported(kinds[i])) b.push_back(others[i]);
    }
    // "cuda" only where this build has it and a GPU is present (CI compiles
    // the CUDA backend on machines without one).
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
