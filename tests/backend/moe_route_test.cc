#include "backend/moe_route.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

namespace g4 {
namespace {

TEST(Router, TopKSetIsTheKLargestLogits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 2);
  for (int trial = 0; trial < 200; ++trial) {
    const int E = 8 + trial % 121, k = 1 + trial % 8;
    std::vector<float> logits(E), scale(E, 1.0f);
    for (float& x : logits) x = d(rng);
    Route r = RouteTopK(logits.data(), E, k, scale.data());
    ASSERT_EQ(r.experts.size(), static_cast<size_t>(k));
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    EXPECT_EQ(std::set<int>(r.experts.begin(), r.experts.end()), std::set<int>(order.begin(), order.begin() + k));
    // Renormalized softmax over the chosen k equals a softmax over their logits.
    double z = 0;
    for (int e : r.experts) z += std::exp(static_cast<double>(logits[e]));
    for (size_t j = 0; j < r.experts.size(); ++j)
      EXPECT_NEAR(r.weights[j], std::exp(static_cast<double>(logits[r.experts[j]])) / z, 1e-6);
  }
}

TEST(Router, PerExpertScaleAppliesAfterRenormalization) {
  const float logits[4] = {1.0f, 3.0f, 2.0f, 0.0f};
  const float scale[4] = {10.f, 0.5f, 2.0f, 7.f};
  Route r = RouteTopK(logits, 4, 2, scale);
  ASSERT_EQ(r.experts, (std::vector<int>{1, 2}));
  const double p1 = 1.0 / (1.0 + std::exp(-1.0)), p2 = 1.0 - p1;
  EXPECT_NEAR(r.weights[0], p1 * 0.5, 1e-6);
  EXPECT_NEAR(r.weights[1], p2 * 2.0, 1e-6);
}

TEST(Router, TiesGoToTheLowerIndex) {
  const float logits[5] = {1, 2, 2, 2, 0};
  const float scale[5] = {1, 1, 1, 1, 1};
  Route r = RouteTopK(logits, 5, 2, scale);
  EXPECT_EQ(r.experts, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace g4
