#include "engine/backend_factory.h"

#include "backend/cpu/cpu_backend.h"

namespace g4 {

StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name) {
  if (name == "cpu" || name == "auto") return MakeCpuBackend();
  if (name == "cuda") return Unsupported("[backend] this build of g4 has no CUDA backend");
  return InvalidArgument("[backend] unknown backend '" + name + "' (cpu, cuda or auto)");
}

}  // namespace g4
