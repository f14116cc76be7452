// Helpers shared by the sampler tests: independent double-precision
// references for the filters, and draws the way a sequence makes them (one
// step after another, its seed kept in the params as the engine keeps it).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "backend/sampler.h"

namespace g4::testing {

inline std::vector<float> RandomLogits(int n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline std::vector<double> Softmax(const std::vector<float>& l, double temperature = 1.0) {
  double m = -INFINITY;
  for (float x : l) m = std::max(m, static_cast<double>(x));
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - m) / temperature);
  for (double& x : p) x /= s;
  return p;
}

// Ids by descending logit, ties by ascending id.
inline std::vector<int> Order(const std::vector<float>& l) {
  std::vector<int> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return l[a] > l[b]; });
  return ids;
}

inline std::set<int> TopKSet(const std::vector<float>& l, int k) {
  std::vector<int> o = Order(l);
  return {o.begin(), o.begin() + std::min<size_t>(k, o.size())};
}

inline std::set<int> TopPSet(const std::vector<float>& l, double p) {
  std::vector<double> probs = Softmax(l);
  std::set<int> kept;
  double cum = 0;
  for (int id : Order(l)) {
    if (cum >= p) break;
    kept.insert(id);
    cum += probs[id];
  }
  return kept;
}

inline std::set<int> MinPSet(const std::vector<float>& l, double min_p) {
  std::vector<double> probs = Softmax(l);
  const double pmax = *std::max_element(probs.begin(), probs.end());
  std::set<int> kept;
  for (size_t i = 0; i < l.size(); ++i) {
    if (probs[i] >= min_p * pmax) kept.insert(static_cast<int>(i));
  }
  return kept;
}

inline std::set<int> AsSet(const std::vector<int>& v) { return {v.begin(), v.end()}; }

inline SamplingParams Seeded(uint64_t seed) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

// The token a sequence seeded params().seed draws at `step` (the Sampler
// itself holds no seed: a test keeps it in the params, as the engine does).
inline int Draw(Sampler& s, float* logits, uint64_t step, std::span<const int> context = {}, LogProbs* out = nullptr) {
  return s.Sample(logits, context, s.params().seed.value_or(0), step, out);
}

// Draws `draws` tokens from the same logits and checks every bin against
// `expected` (ids -> probability; others must never appear): each count
// within 5 sigma of its mean, and Pearson's chi-square below a bound far in
// the tail of its distribution.
inline void ExpectFrequencies(Sampler& sampler, const std::vector<float>& logits, const std::map<int, double>& expected,
                       int draws) {
  std::map<int, int> counts;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    const int t = Draw(sampler, l.data(), static_cast<uint64_t>(i));
    ASSERT_TRUE(expected.count(t)) << "sampled token " << t << " outside the expected support";
    ++counts[t];
  }
  double chi2 = 0;
  for (const auto& [id, p] : expected) {
    const double mean = draws * p;
    const double sigma = std::sqrt(draws * p * (1 - p));
    EXPECT_LE(std::abs(counts[id] - mean), 5 * sigma + 1) << "token " << id << " p=" << p;
    if (mean > 0) chi2 += (counts[id] - mean) * (counts[id] - mean) / mean;
  }
  // df = bins - 1; mean df, sd sqrt(2 df): allow df + 8 sd + 10.
  const double df = expected.size() - 1.0;
  EXPECT_LT(chi2, df + 8 * std::sqrt(2 * df) + 10) << "chi-square over " << expected.size() << " bins";
}

}  // namespace g4::testing
