// MoE routing for one token (transformers' Gemma4 text router): softmax
// over all experts, the k largest, renormalized over those k, then scaled per
// expert. The host reference of Ops::MoeRoute, in this exact float order:
//   m = max logit; p[e] = exp(logit[e] - m); s = p[0] + p[1] + ... (in e order);
//   p[e] /= s; top k by (p desc, e asc); t = sum of the k p's in that order;
//   weight[j] = p[e_j] / t * per_expert_scale[e_j].
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
// REQUIRES: 1 <= k <= num_experts.
Route RouteTopK(const float* logits, int num_experts, int k, const float* per_expert_scale);

// The same into caller arrays ids[k], weights[k], with scratch arrays of
// num_experts entries each (no allocation, for per-row use inside a step).
void RouteTopKInto(const float* logits, int num_experts, int k, const float* per_expert_scale,
                   float* prob_scratch, int32_t* order_scratch, int32_t* ids, float* weights);

}  // namespace g4
