// The kernel variants of the CPU backend (isa.h): each is the same kernel
// source compiled for one instruction set into its own namespace, reached
// through its Ops implementation. cpu_backend.cc picks one at start-up.
// Internal to backend/cpu.
#pragma once

#include <memory>

#include "backend/ops.h"

namespace g4::cpu {

namespace avx512 {
std::unique_ptr<Ops> MakeCpuOps();
}  // namespace avx512
namespace avx2 {
std::unique_ptr<Ops> MakeCpuOps();
}  // namespace avx2
namespace baseline {
std::unique_ptr<Ops> MakeCpuOps();
}  // namespace baseline

}  // namespace g4::cpu
