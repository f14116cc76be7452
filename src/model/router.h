// MoE routing for one token (shared docs gemma4-architecture.md 3.5): softmax
// over all experts, the k largest, renormalized over those k, then scaled per
// expert.
#pragma once

#include <cstdint>
#include <vector>

namespace g4 {

struct Route {
  std::vector<int> experts;      // k expert indices, by descending probability
  std::vector<float> weights;    // their final weights
};

// `logits` has num_experts entries; `per_expert_scale` too. Ties go to the
// lower index (as torch.topk on CPU does for equal values).
Route RouteTopK(const float* logits, int num_experts, int k, const float* per_expert_scale);

}  // namespace g4
