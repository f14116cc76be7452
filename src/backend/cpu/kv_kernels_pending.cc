// TEMPORARY: the paged-KV kernels are written on branch batched-kvops; these
// stand-ins fail loudly until that branch is merged (then this file goes).
#include "backend/cpu/kv_kernels.h"
#include "core/check.h"

namespace g4::cpu {

void KvWrite(const StepRows&, const PagedKv&, const TensorView&, const TensorView&) {
  G4_CHECK_MSG(false, "[cpu] KvWrite: not merged yet (batched-kvops)");
}
void PagedAttention(const PagedAttentionArgs&) {
  G4_CHECK_MSG(false, "[cpu] PagedAttention: not merged yet (batched-kvops)");
}
void KvRecodeBlocks(const PagedKvStore&, const PagedKvStore&, int, std::span<const int32_t>,
                    std::span<const int32_t>, std::span<const int32_t>) {
  G4_CHECK_MSG(false, "[cpu] KvRecodeBlocks: not merged yet (batched-kvops)");
}

}  // namespace g4::cpu
