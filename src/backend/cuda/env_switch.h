// Switches the CUDA backend reads from the environment to compare a path
// with the one it replaced (G4_CUDA_GRAPHS, G4_CUDA_ROW_BLOCK,
// G4_CUDA_MOE_ROW). Host code only.
#pragma once

#include <cstdlib>
#include <cstring>

namespace g4::cuda {

// On unless the variable `name` is set to "0". Callers read it once (a
// function-local static), so a switch holds for the whole process.
inline bool EnvSwitchOn(const char* name) {
  const char* e = std::getenv(name);
  return !(e != nullptr && std::strcmp(e, "0") == 0);
}

}  // namespace g4::cuda
