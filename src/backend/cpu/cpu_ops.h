// The Ops implementation of the CPU backend (cpu_ops.cc), owned by
// CpuBackend (cpu_backend.cc). Internal to backend/cpu.
#pragma once

#include <memory>

#include "backend/ops.h"

namespace g4::cpu {

std::unique_ptr<Ops> MakeCpuOps();

}  // namespace g4::cpu
