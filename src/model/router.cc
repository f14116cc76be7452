#include "model/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace g4 {

Route RouteTopK(const float* logits, int num_experts, int k, const float* per_expert_scale) {
  float max_logit = logits[0];
  for (int e = 1; e < num_experts; ++e) max_logit = std::max(max_logit, logits[e]);
  std::vector<float> prob(num_experts);
  float sum = 0;
  for (int e = 0; e < num_experts; ++e) sum += prob[e] = std::exp(logits[e] - max_logit);
  for (float& p : prob) p /= sum;

  std::vector<int> order(num_experts);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return prob[a] > prob[b] || (prob[a] == prob[b] && a < b);
  });
  Route r;
  r.experts.assign(order.begin(), order.begin() + k);
  float top_sum = 0;
  for (int e : r.experts) top_sum += prob[e];
  for (int e : r.experts) r.weights.push_back(prob[e] / top_sum * per_expert_scale[e]);
  return r;
}

}  // namespace g4
