// Switches the CUDA backend reads from the environment to compare a path
// with the one it replaced (G4_CUDA_GRAPHS, G4_CUDA_ROW_BLOCK,
// G4_CUDA_MOE_ROW, G4_CUDA_ROW_MMA, G4_CUDA_KV_PLAIN,
// G4_CUDA_ATTN_LATE_WAIT, G4_CUDA_ATTN_ALLOW, G4_CUDA_ATTN_QTERMS,
// G4_CUDA_ATTN_TURBO_RUNS, G4_CUDA_ATTN_TURBO_OCC, G4_CUDA_ROWS_OCC3,
// G4_CUDA_ROWS_FILL, G4_CUDA_NORM_QUANT, G4_CUDA_ATTN_QUANT). Host code
// only.
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

// "1" on, "0" off, anything else (or unset) `by_default`: for a path that
// stays opt-in until it has been measured on a GPU.
inline bool EnvSwitch(const char* name, bool by_default) {
  const char* e = std::getenv(name);
  if (e != nullptr && std::strcmp(e, "1") == 0) return true;
  if (e != nullptr && std::strcmp(e, "0") == 0) return false;
  return by_default;
}

}  // namespace g4::cuda
