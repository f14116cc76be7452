// The sampler's randomness: counter-based draws, documented bit for bit,
// that depend only on (seed, step) and are independent across steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "backend/sampler.h"
#include "sampler_test_util.h"

namespace g4 {
namespace {

using testing::Draw;
using testing::ExpectFrequencies;
using testing::RandomLogits;
using testing::Seeded;
using testing::Softmax;

TEST(SamplerTest, SeededRunsRepeatAndSeedsDiffer) {
  auto run = [](uint64_t seed) {
    SamplingParams p = Seeded(seed);
    p.top_p = 0.95f;
    Sampler s(p, 4000);
    std::vector<int> tokens;
    for (uint32_t step = 0; step < 100; ++step) {
      std::vector<float> l = RandomLogits(4000, step, 0.5f);
      tokens.push_back(Draw(s, l.data(), step, tokens));
    }
    return tokens;
  };
  EXPECT_EQ(run(123), run(123));
  EXPECT_NE(run(123), run(124));
}

TEST(SamplerTest, DrawsAreTheDocumentedCounterBasedFunction) {
  // SplitMix64's published first outputs for state 0 (each call adds the
  // golden gamma first): 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4.
  EXPECT_EQ(SplitMix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(SplitMix64(0x9E3779B97F4A7C15ull), 0x6E789E6AA1B965F4ull);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100; ++i) {
    const uint64_t seed = rng(), step = rng() % 1000, draw = i % 2;
    const uint64_t bits = SplitMix64(SplitMix64(SplitMix64(seed) ^ step) ^ draw);
    EXPECT_EQ(SampleBits(seed, step, draw), bits);
    EXPECT_EQ(SampleUniform(seed, step, draw), static_cast<double>(bits >> 11) / 9007199254740992.0);
    EXPECT_GE(SampleUniform(seed, step, draw), 0.0);
    EXPECT_LT(SampleUniform(seed, step, draw), 1.0);
  }
}

TEST(SamplerTest, SameSeedAndStepGiveTheSameTokenWhateverCameBefore) {
  // No state carries between calls: a fresh sampler at step 37 and one that
  // has already drawn 100 tokens agree token for token on the same inputs.
  std::mt19937 rng(31);
  for (int trial = 0; trial < 50; ++trial) {
    SamplingParams p = Seeded(1000 + trial);
    p.temperature = 0.5f + (rng() % 100) / 50.0f;
    p.top_p = trial % 3 ? 0.9f : 1.0f;
    p.xtc_probability = trial % 4 == 0 ? 0.5f : 0.0f;
    const std::vector<float> l = RandomLogits(700, 600 + trial, 1.0f);
    Sampler fresh(p, 700), used(p, 700);
    for (int i = 0; i < 100; ++i) {
      std::vector<float> other = RandomLogits(700, 9000 + i, 2.0f);
      Draw(used, other.data(), i);
    }
    const uint64_t step = 37 + trial;
    std::vector<float> a = l, b = l;
    EXPECT_EQ(Draw(fresh, a.data(), step), Draw(used, b.data(), step)) << "trial " << trial;
  }
}

TEST(SamplerTest, StepsAndSeedsDrawDifferentTokensInDistribution) {
  // Over steps 0..N-1 of one seed (same logits every step), the tokens follow
  // softmax(l / T): steps are independent draws, not one repeated draw.
  const std::vector<float> l = {0.3f, -0.2f, 1.1f, 0.0f, 0.8f, -1.0f};
  SamplingParams p = Seeded(77);
  p.temperature = 0.9f;
  Sampler s(p, 6);
  const std::vector<double> probs = Softmax(l, p.temperature);
  std::map<int, double> expected;
  for (int i = 0; i < 6; ++i) expected[i] = probs[i];
  ExpectFrequencies(s, l, expected, 60000);
  // Across seeds at one step: also the same distribution.
  std::map<int, int> counts;
  const int n = 60000;
  for (int seed = 0; seed < n; ++seed) {
    std::vector<float> copy = l;
    ++counts[s.Sample(copy.data(), {}, static_cast<uint64_t>(seed), 5)];
  }
  for (int i = 0; i < 6; ++i) {
    const double mean = n * probs[i], sigma = std::sqrt(n * probs[i] * (1 - probs[i]));
    EXPECT_LE(std::abs(counts[i] - mean), 5 * sigma + 1) << "token " << i;
  }
}

TEST(SamplerTest, CategoricalDrawWalksKeptTokensInAscendingId) {
  // The documented rule, recomputed here in double: kept tokens (top-k's
  // selection leaves them in no particular order) weighed exp((l - max) / T),
  // summed in ascending id; the token is the first whose running sum exceeds
  // uniform(seed, step, 0) * total. Draws within 1e-9 of a boundary are
  // skipped (float vs double weights may round either way there).
  int checked = 0;
  for (int trial = 0; trial < 20; ++trial) {
    SamplingParams p = Seeded(300 + trial);
    p.temperature = 0.6f + 0.1f * (trial % 7);
    p.top_k = 5 + trial;
    p.top_p = trial % 2 ? 0.95f : 1.0f;
    Sampler s(p, 300);
    const std::vector<float> l = RandomLogits(300, 700 + trial, 1.0f);
    std::vector<int> kept = s.Filtered(l.data(), false).ids;
    std::sort(kept.begin(), kept.end());
    const double max = *std::max_element(l.begin(), l.end());
    double total = 0;
    for (int id : kept) total += std::exp((l[id] - max) / p.temperature);
    for (uint64_t step = 0; step < 50; ++step) {
      const double target = SampleUniform(*p.seed, step, kDrawCategorical) * total;
      double acc = 0, gap = INFINITY;
      int want = kept.back();
      for (int id : kept) {
        acc += std::exp((l[id] - max) / p.temperature);
        gap = std::min(gap, std::fabs(acc - target));
        if (target < acc) {
          want = id;
          break;
        }
      }
      if (gap < 1e-9 * total) continue;
      std::vector<float> copy = l;
      EXPECT_EQ(Draw(s, copy.data(), step), want) << "trial " << trial << " step " << step;
      ++checked;
    }
  }
  EXPECT_GT(checked, 900);
}

}  // namespace
}  // namespace g4
