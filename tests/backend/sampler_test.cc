// Sampler tests: every expectation is computed here independently (double
// precision softmax, full sorts) or is a statistical property checked over
// many draws with fixed seeds.
#include "backend/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "io/config.h"
#include "sampler_test_util.h"

namespace g4 {
namespace {

using testing::AsSet;
using testing::Draw;
using testing::ExpectFrequencies;
using testing::MinPSet;
using testing::Order;
using testing::RandomLogits;
using testing::Seeded;
using testing::Softmax;
using testing::TopKSet;
using testing::TopPSet;

TEST(SamplerTest, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams p = Seeded(1);
  p.temperature = 0;
  Sampler s(p, 500);
  for (uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<float> l = RandomLogits(500, seed);
    // Plant a tie for the maximum at two random positions.
    std::mt19937 rng(seed);
    int a = rng() % 500, b = rng() % 500;
    const float top = *std::max_element(l.begin(), l.end()) + 1.0f;
    l[a] = l[b] = top;
    std::vector<float> copy = l;
    EXPECT_EQ(Draw(s, copy.data(), seed), std::min(a, b));
  }
}

TEST(SamplerTest, TopKNeverLeavesTheKBest) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int k = 1 + rng() % 40;
    SamplingParams p = Seeded(trial);
    p.top_k = k;
    p.temperature = 0.5f + (rng() % 100) / 50.0f;
    Sampler s(p, 1000);
    std::vector<float> l = RandomLogits(1000, 100 + trial, 1.0f);
    const std::set<int> best = TopKSet(l, k);
    EXPECT_EQ(AsSet(s.Filtered(l.data(), false).ids), best);
    for (int draw = 0; draw < 300; ++draw) {
      std::vector<float> copy = l;
      EXPECT_TRUE(best.count(Draw(s, copy.data(), draw))) << "k=" << k;
    }
  }
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    SamplingParams p = Seeded(trial);
    p.top_p = 0.05f + (rng() % 90) / 100.0f;
    Sampler s(p, 2000);
    std::vector<float> l = RandomLogits(2000, 200 + trial, 0.5f + trial * 0.1f);
    const std::set<int> expected = TopPSet(l, p.top_p);
    const Candidates c = s.Filtered(l.data(), false);
    EXPECT_EQ(AsSet(c.ids), expected) << "top_p=" << p.top_p;
    // The kept set is minimal: dropping its least likely token falls short of p.
    std::vector<double> probs = Softmax(l);
    double mass = 0;
    for (int id : c.ids) mass += probs[id];
    EXPECT_GE(mass, p.top_p - 1e-6);
    EXPECT_LT(mass - probs[c.ids.back()], p.top_p + 1e-6);
  }
}

TEST(SamplerTest, MinPKeepsExactlyTokensAboveTheScaledMax) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 40; ++trial) {
    SamplingParams p = Seeded(trial);
    p.min_p = 0.01f + (rng() % 60) / 100.0f;
    Sampler s(p, 1500);
    std::vector<float> l = RandomLogits(1500, 300 + trial, 1.0f + trial * 0.1f);
    EXPECT_EQ(AsSet(s.Filtered(l.data(), false).ids), MinPSet(l, p.min_p)) << "min_p=" << p.min_p;
  }
}

TEST(SamplerTest, FiltersCombineAsIntersection) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 80; ++trial) {
    SamplingParams p = Seeded(trial);
    p.top_k = trial % 2 ? 1 + rng() % 50 : 0;
    p.top_p = 0.3f + (rng() % 70) / 100.0f;
    p.min_p = (rng() % 20) / 100.0f;
    p.temperature = 0.3f + (rng() % 100) / 40.0f;
    Sampler s(p, 1000);
    std::vector<float> l = RandomLogits(1000, 400 + trial, 0.5f + trial * 0.05f);
    if (trial % 4 >= 2) {
      for (float& x : l) x = std::round(x * 2) / 2;  // many ties: order falls back to ids
    }
    std::set<int> expected;
    const std::set<int> a = p.top_k ? TopKSet(l, p.top_k) : AsSet(Order(l)), b = TopPSet(l, p.top_p),
                        c = MinPSet(l, p.min_p);
    for (int id : a) {
      if (b.count(id) && c.count(id)) expected.insert(id);
    }
    const Candidates got = s.Filtered(l.data(), false);
    EXPECT_EQ(AsSet(got.ids), expected);
    // Probabilities: softmax(l / T) renormalized over the kept set.
    std::vector<double> pt = Softmax(l, p.temperature);
    double z = 0;
    for (int id : expected) z += pt[id];
    for (size_t i = 0; i < got.ids.size(); ++i) EXPECT_NEAR(got.probs[i], pt[got.ids[i]] / z, 1e-9);
  }
}

TEST(SamplerTest, XtcRemovesAllButTheLeastLikelyAboveThreshold) {
  std::vector<float> l = {3.0f, 2.9f, 2.5f, 1.0f, 0.5f, -1.0f, 2.95f, 0.0f};
  SamplingParams p = Seeded(3);
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.1f;
  p.xtc_exempt_tokens = {1};
  Sampler s(p, static_cast<int>(l.size()));
  std::vector<double> probs = Softmax(l);
  std::set<int> above;
  double least = 1;
  for (int i = 0; i < 8; ++i) {
    if (probs[i] > 0.1) {
      above.insert(i);
      least = std::min(least, probs[i]);
    }
  }
  ASSERT_GE(above.size(), 3u);  // the fixture exercises removal
  std::set<int> expected;
  for (int i = 0; i < 8; ++i) {
    if (!(probs[i] > least) || i == 1) expected.insert(i);
  }
  EXPECT_EQ(AsSet(s.Filtered(l.data(), true).ids), expected);
  EXPECT_EQ(s.Filtered(l.data(), false).ids.size(), 8u);
  // Sampling with a coin that always fires never yields a removed token.
  for (int i = 0; i < 500; ++i) {
    std::vector<float> copy = l;
    EXPECT_TRUE(expected.count(Draw(s, copy.data(), i)));
  }
}

TEST(SamplerTest, XtcComesBeforeTopK) {
  // top_p and min_p first, then XTC on the renormalized survivors, then top_k
  // over what XTC left.
  std::mt19937 rng(23);
  for (int trial = 0; trial < 30; ++trial) {
    SamplingParams p = Seeded(trial);
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.02f + (rng() % 10) / 100.0f;
    p.top_p = 0.9f;
    p.min_p = 0.001f;
    p.top_k = 1 + rng() % 20;
    Sampler s(p, 400);
    std::vector<float> l = RandomLogits(400, 500 + trial, 2.0f);
    const std::set<int> b = TopPSet(l, p.top_p), c = MinPSet(l, p.min_p);
    std::vector<double> probs = Softmax(l);
    std::vector<int> survivors;
    double mass = 0;
    for (int id : Order(l)) {
      if (b.count(id) && c.count(id)) {
        survivors.push_back(id);
        mass += probs[id];
      }
    }
    double least = 2;
    int above = 0;
    for (int id : survivors) {
      if (probs[id] / mass > p.xtc_threshold) {
        ++above;
        least = std::min(least, probs[id] / mass);
      }
    }
    std::set<int> expected;
    for (int id : survivors) {
      if (static_cast<int>(expected.size()) == p.top_k) break;
      if (above >= 2 && probs[id] / mass > least) continue;
      expected.insert(id);
    }
    EXPECT_EQ(AsSet(s.Filtered(l.data(), true).ids), expected) << "trial " << trial;
  }
}

TEST(SamplerTest, FrequenciesMatchSoftmaxAtTemperature) {
  std::vector<float> l = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -2.0f, 0.7f};
  for (float t : {1.0f, 0.6f, 1.7f}) {
    SamplingParams p = Seeded(42);
    p.temperature = t;
    Sampler s(p, 8);
    std::vector<double> probs = Softmax(l, t);
    std::map<int, double> expected;
    for (int i = 0; i < 8; ++i) expected[i] = probs[i];
    ExpectFrequencies(s, l, expected, 100000);
  }
}

TEST(SamplerTest, FrequenciesMatchFilteredDistribution) {
  std::vector<float> l = RandomLogits(300, 5, 1.5f);
  SamplingParams p = Seeded(43);
  p.temperature = 0.8f;
  p.top_p = 0.8f;
  p.top_k = 12;
  Sampler s(p, 300);
  std::set<int> kept;
  const std::set<int> a = TopKSet(l, p.top_k), b = TopPSet(l, p.top_p);
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(kept, kept.begin()));
  ASSERT_GE(kept.size(), 3u);
  std::vector<double> pt = Softmax(l, p.temperature);
  double z = 0;
  for (int id : kept) z += pt[id];
  std::map<int, double> expected;
  for (int id : kept) expected[id] = pt[id] / z;
  ExpectFrequencies(s, l, expected, 100000);
}

TEST(SamplerTest, RepetitionPenaltyMovesExactlyWindowTokens) {
  std::vector<float> l = RandomLogits(100, 9);
  l[5] = 0.0f;
  SamplingParams p = Seeded(1);
  p.repetition_penalty = 1.3f;
  p.repetition_context_size = 4;
  const std::vector<int> context = {1, 2, 3, 5, 7, 7, 9, 5};  // window: 5 7 9 5 (ids 1,2,3 are too old)
  std::vector<float> got = l;
  ApplyPenalties(p, context, got.data(), 100);
  for (int i = 0; i < 100; ++i) {
    float want = l[i];
    if (i == 5 || i == 7 || i == 9) want = l[i] > 0 ? l[i] / 1.3f : l[i] * 1.3f;  // applied once per id
    EXPECT_EQ(got[i], want) << "id " << i;
  }
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesFollowOpenAi) {
  std::vector<float> l = RandomLogits(50, 10);
  SamplingParams p = Seeded(1);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.presence_context_size = 0;  // whole context
  p.frequency_context_size = 0;
  const std::vector<int> context = {4, 4, 4, 8, 9, 9, 49, -3, 1000};  // out-of-range ids are ignored
  std::vector<float> got = l;
  ApplyPenalties(p, context, got.data(), 50);
  std::map<int, int> counts = {{4, 3}, {8, 1}, {9, 2}, {49, 1}};
  for (int i = 0; i < 50; ++i) {
    const int c = counts.count(i) ? counts[i] : 0;
    const float want = c > 0 ? (l[i] - 0.5f) - 0.25f * c : l[i];
    EXPECT_FLOAT_EQ(got[i], want) << "id " << i;
  }
  // Default windows are the last 20 tokens.
  SamplingParams q = Seeded(1);
  q.presence_penalty = 1.0f;
  std::vector<int> long_context(30);
  std::iota(long_context.begin(), long_context.end(), 0);
  got = l;
  ApplyPenalties(q, long_context, got.data(), 50);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i], (i >= 10 && i < 30) ? l[i] - 1.0f : l[i]) << i;
}

TEST(SamplerTest, LogitBiasAndPenaltiesAreVisibleInLogitsAndChoice) {
  SamplingParams p = Seeded(1);
  p.temperature = 0;
  p.logit_bias = {{3, 100.0f}, {0, -5.0f}};
  Sampler s(p, 10);
  std::vector<float> l = RandomLogits(10, 3);
  std::vector<float> copy = l;
  EXPECT_EQ(Draw(s, copy.data(), 0), 3);
  EXPECT_EQ(copy[3], l[3] + 100.0f);
  EXPECT_EQ(copy[0], l[0] - 5.0f);
  EXPECT_EQ(copy[1], l[1]);
  // A ban (-inf) is never chosen even by sampling.
  SamplingParams ban = Seeded(2);
  ban.logit_bias = {{0, -INFINITY}};
  Sampler t(ban, 2);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> two = {5.0f, 0.0f};
    EXPECT_EQ(Draw(t, two.data(), i), 1);
  }
}

TEST(SamplerTest, LogProbsAreTheLogSoftmaxAfterBiasAndPenalties) {
  SamplingParams p = Seeded(8);
  p.temperature = 0.7f;
  p.top_k = 5;
  p.top_logprobs = 6;
  p.logit_bias = {{17, 2.0f}};
  p.repetition_penalty = 1.5f;
  Sampler s(p, 300);
  const std::vector<int> context = {17, 40, 41};
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> l = RandomLogits(300, seed);
    // Independent reference: bias, repetition penalty, then log-softmax in double.
    std::vector<float> adjusted = l;
    adjusted[17] += 2.0f;
    for (int id : {17, 40, 41}) adjusted[id] = adjusted[id] > 0 ? adjusted[id] / 1.5f : adjusted[id] * 1.5f;
    std::vector<double> probs = Softmax(adjusted);
    LogProbs out;
    std::vector<float> copy = l;
    const int t = Draw(s, copy.data(), seed, context, &out);
    EXPECT_EQ(out.token, t);
    EXPECT_NEAR(out.logprob, std::log(probs[t]), 1e-4);
    std::vector<int> order = Order(adjusted);
    ASSERT_EQ(out.top.size(), 6u);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(out.top[i].id, order[i]);
      EXPECT_NEAR(out.top[i].logprob, std::log(probs[order[i]]), 1e-4);
    }
  }
}

TEST(SamplerTest, NonFiniteLogitsNeverWin) {
  SamplingParams p = Seeded(5);
  Sampler s(p, 6);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = {NAN, 0.0f, -INFINITY, 0.5f, NAN, -1.0f};
    const int t = Draw(s, l.data(), i);
    EXPECT_TRUE(t == 1 || t == 3 || t == 5) << t;
  }
  std::vector<float> all_bad = {NAN, -INFINITY, NAN};
  LogProbs out;
  Sampler g(p, 3);
  EXPECT_EQ(Draw(g, all_bad.data(), 0, {}, &out), 0);
  std::vector<float> pos_inf = {0.0f, INFINITY, 1.0f};
  EXPECT_EQ(Draw(g, pos_inf.data(), 1), 1);
}

TEST(SamplerTest, ExtremeValuesStayInRange) {
  const std::vector<std::vector<float>> cases = {
      {FLT_MAX, -FLT_MAX, 0.0f, FLT_MAX},
      {1e-40f, 0.0f, 2e-40f, -1e-45f},  // differences below float's normal range
      {-1e30f, -1e30f, -1e30f},
      {3.0f, 3.0f, 3.0f, 3.0f, 3.0f}};
  for (float t : {1.0f, 1e-30f, 1e-39f, 50.0f}) {
    for (int variant = 0; variant < 4; ++variant) {
      SamplingParams p = Seeded(variant);
      p.temperature = t;
      p.top_p = variant & 1 ? 0.5f : 1.0f;
      p.min_p = variant & 2 ? 0.5f : 0.0f;
      p.top_logprobs = 2;
      for (const auto& base : cases) {
        Sampler s(p, static_cast<int>(base.size()));
        std::vector<float> l = base;
        LogProbs out;
        const int tok = Draw(s, l.data(), variant, {}, &out);
        ASSERT_GE(tok, 0);
        ASSERT_LT(tok, static_cast<int>(base.size()));
        EXPECT_FALSE(std::isnan(out.logprob));
        EXPECT_LE(out.logprob, 1e-6);
      }
    }
  }
}

TEST(SamplerTest, FullVocabularyTopP) {
  // The real vocabulary size: exercises the lazily sorted prefix.
  const int n = 262144;
  SamplingParams p = Seeded(9);
  p.top_p = 0.9f;
  p.top_k = 64;
  Sampler s(p, n);
  std::vector<float> l = RandomLogits(n, 77, 2.0f);
  const std::set<int> a = TopKSet(l, 64), b = TopPSet(l, 0.9);
  std::set<int> expected;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(expected, expected.begin()));
  EXPECT_EQ(AsSet(s.Filtered(l.data(), false).ids), expected);
  for (int i = 0; i < 5; ++i) {
    std::vector<float> copy = l;
    EXPECT_TRUE(expected.count(Draw(s, copy.data(), i)));
  }
}

TEST(SamplerTest, Validation) {
  SamplingParams ok;
  EXPECT_TRUE(ValidateSamplingParams(ok, 100).ok());
  auto bad = [](auto mutate, const char* field) {
    SamplingParams p;
    mutate(p);
    Status st = ValidateSamplingParams(p, 100);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  };
  bad([](SamplingParams& p) { p.temperature = -1; }, "temperature");
  bad([](SamplingParams& p) { p.temperature = NAN; }, "temperature");
  bad([](SamplingParams& p) { p.top_p = 0; }, "top_p");
  bad([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  bad([](SamplingParams& p) { p.top_k = -2; }, "top_k");
  bad([](SamplingParams& p) { p.min_p = 2; }, "min_p");
  bad([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  bad([](SamplingParams& p) { p.frequency_context_size = -1; }, "frequency_context_size");
  bad([](SamplingParams& p) { p.logit_bias[100] = 1; }, "logit_bias");
  bad([](SamplingParams& p) { p.logit_bias[3] = NAN; }, "logit_bias");
  bad([](SamplingParams& p) { p.xtc_threshold = 0.9f; }, "xtc_threshold");
  // A sampler built from invalid params still samples in range.
  SamplingParams wild;
  wild.temperature = -3;
  wild.top_p = -1;
  wild.top_k = -5;
  wild.min_p = 7;
  wild.logit_bias = {{-4, 1.0f}, {1 << 30, 2.0f}};
  wild.top_logprobs = 1000;
  Sampler s(wild, 10);
  std::vector<float> l = RandomLogits(10, 1);
  LogProbs out;
  const int t = Draw(s, l.data(), 0, std::vector<int>{-1, 99999}, &out);
  EXPECT_GE(t, 0);
  EXPECT_LT(t, 10);
  EXPECT_EQ(out.top.size(), 10u);
}

TEST(SamplerTest, GenerationDefaultsYieldToUserOverrides) {
  GenerationConfig gen;
  gen.temperature = 1.0;
  gen.top_p = 0.95;
  gen.top_k = 64;
  SamplingParams p;
  p.min_p = 0.05f;  // caller's own default survives: the config has no min_p
  SamplingOverrides user;
  user.top_k = 10;
  user.repetition_penalty = 1.1f;
  ApplyGenerationDefaults(gen, user, p);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.top_k, 10);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  SamplingOverrides greedy;
  greedy.temperature = 0.0f;
  ApplyGenerationDefaults(gen, greedy, p);
  EXPECT_EQ(p.temperature, 0.0f);
}

TEST(SamplerTest, DoSampleFalseMeansGreedyUnlessTheUserSetATemperature) {
  GenerationConfig gen;
  gen.temperature = 0.7;
  gen.do_sample = false;
  SamplingParams p;
  ApplyGenerationDefaults(gen, SamplingOverrides{}, p);
  EXPECT_EQ(p.temperature, 0.0f);
  SamplingOverrides user;
  user.temperature = 0.5f;
  ApplyGenerationDefaults(gen, user, p);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  gen.do_sample = true;
  SamplingParams q;
  ApplyGenerationDefaults(gen, SamplingOverrides{}, q);
  EXPECT_FLOAT_EQ(q.temperature, 0.7f);
}

}  // namespace
}  // namespace g4
