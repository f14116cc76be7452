#include "backend/moe_route.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace g4 {

void RouteTopKInto(const float* logits, int num_experts, int k, const float* per_expert_scale,
                   float* prob_scratch, int32_t* order_scratch, int32_t* ids, float* weights) {
  G4_CHECK(k >= 1 && k <= num_experts);
  float* prob = prob_scratch;
  int32_t* order = order_scratch;
  float max_logit = logits[0];
  for (int e = 1; e < num_experts; ++e) max_logit = std::max(max_logit, logits[e]);
  float sum = 0;
  for (int e = 0; e < num_experts; ++e) sum += prob[e] = std::exp(logits[e] - max_logit);
  for (int e = 0; e < num_experts; ++e) prob[e] /= sum;

  std::iota(order, order + num_experts, 0);
  std::partial_sort(order, order + k, order + num_experts, [&](int a, int b) {
    return prob[a] > prob[b] || (prob[a] == prob[b] && a < b);
  });
  float top_sum = 0;
  for (int j = 0; j < k; ++j) top_sum += prob[order[j]];
  for (int j = 0; j < k; ++j) {
    ids[j] = order[j];
    weights[j] = prob[order[j]] / top_sum * per_expert_scale[order[j]];
  }
}

Route RouteTopK(const float* logits, int num_experts, int k, const float* per_expert_scale) {
  std::vector<float> prob(num_experts);
  std::vector<int32_t> order(num_experts), ids(k);
  Route r;
  r.weights.resize(k);
  RouteTopKInto(logits, num_experts, k, per_expert_scale, prob.data(), order.data(), ids.data(), r.weights.data());
  r.experts.assign(ids.begin(), ids.end());
  return r;
}

}  // namespace g4
