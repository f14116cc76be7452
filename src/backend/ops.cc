#include "backend/ops.h"

namespace g4 {
namespace {

constexpr size_t kAlign = 64;
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

// The CPU layout (backend/cpu/moe_experts.cc), each part 64-byte aligned,
// for P = rows * top_k (row, expert) pairs:
//   int32 order[P] | int32 slot[P] | float in_out[P, H] | float g[T, Ie] | float u[T, Ie]
size_t MoeWorkspaceBytes(int64_t rows, int top_k, int64_t hidden, int64_t expert_width) {
  const size_t pairs = static_cast<size_t>(rows) * static_cast<size_t>(top_k);
  return 2 * Aligned(pairs * sizeof(int32_t)) + Aligned(pairs * hidden * sizeof(float)) +
         2 * Aligned(static_cast<size_t>(rows) * expert_width * sizeof(float));
}

}  // namespace g4
