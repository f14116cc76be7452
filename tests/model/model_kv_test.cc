// The paged KV pool under the real model graph (fixture models in
// testdata/models): released sliding blocks against keeping every block,
// quality per mode (teacher-forced KL against plain), delayed modes exact
// before their boundary, and plain storage dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "model/model_runner.h"
#include "test_util.h"

namespace g4 {
namespace {

std::vector<int32_t> Ids(int n, uint32_t seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = static_cast<int32_t>(rng() % vocab);
  return ids;
}

// Logits [ids.size(), V]: the first `head` tokens prefilled in chunks of
// `chunk`, the rest decoded one at a time (teacher forcing).
std::vector<float> TeacherForced(testing::ModelRunner& r, const std::vector<int32_t>& ids, int64_t head,
                                 int64_t chunk) {
  KvSeq seq = r.pool().NewSequence();
  std::vector<int32_t> first(ids.begin(), ids.begin() + head);
  auto logits = r.Prefill(seq, first, chunk);
  EXPECT_TRUE(logits.ok()) << logits.status().ToString();
  std::vector<float> out = logits.ok() ? *logits : std::vector<float>();
  for (size_t i = head; i < ids.size(); ++i) {
    if (r.pool().max_append_tokens(seq) == 0) {
      EXPECT_TRUE(r.pool().Maintain(seq).ok());
    }
    auto rows = r.Step({{&seq, {ids[i]}, true}});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (rows.ok()) out.insert(out.end(), (*rows)[0].begin(), (*rows)[0].end());
  }
  return out;
}

// Mean KL(P || Q) over rows, and the fraction of rows with the same argmax.
std::pair<double, double> KlAndTop1(const std::vector<float>& p_logits, const std::vector<float>& q_logits,
                                    int64_t V) {
  const int64_t rows = static_cast<int64_t>(p_logits.size()) / V;
  double kl = 0;
  int64_t agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = &p_logits[r * V];
    const float* q = &q_logits[r * V];
    const double pm = *std::max_element(p, p + V), qm = *std::max_element(q, q + V);
    double ps = 0, qs = 0;
    for (int64_t i = 0; i < V; ++i) ps += std::exp(p[i] - pm), qs += std::exp(q[i] - qm);
    const double plse = pm + std::log(ps), qlse = qm + std::log(qs);
    for (int64_t i = 0; i < V; ++i) {
      const double lp = p[i] - plse, lq = q[i] - qlse;
      kl += std::exp(lp) * (lp - lq);
    }
    agree += (std::max_element(p, p + V) - p) == (std::max_element(q, q + V) - q);
  }
  return {kl / rows, static_cast<double>(agree) / rows};
}

TEST(ModelKv, ReleasingSlidingBlocksMatchesKeepingEveryBlock) {
  for (const std::string& name : testing::kFixtureModels) {
    testing::ModelRunner released(name, "plain", 4, 64, 8, /*sliding_ring=*/true);
    testing::ModelRunner kept(name, "plain", 4, 64, 8, /*sliding_ring=*/false);
    ASSERT_TRUE(released.ok() && kept.ok());
    const int window = released.model().config().sliding_window;
    const auto ids = Ids(96, 7, released.vocab());
    ASSERT_GE(static_cast<int>(ids.size()), 5 * window);
    for (int64_t chunk : {7, 32}) {
      const auto a = TeacherForced(released, ids, 40, chunk);
      const auto b = TeacherForced(kept, ids, 40, chunk);
      // Bit-identical: attention reduces over visible keys in position order
      // whatever blocks hold them.
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << name << " chunk " << chunk;
    }
    // Released really is bounded: a sequence holds at most window + one
    // block of sliding blocks between steps.
    KvSeq seq = released.pool().NewSequence();
    ASSERT_TRUE(released.Prefill(seq, ids, 5).ok());
    const int64_t B = released.pool().block_size();
    EXPECT_LE(released.pool().blocks_held(seq, KvGroup::kSliding), (window + B - 1) / B + 1) << name;
    KvSeq all = kept.pool().NewSequence();
    ASSERT_TRUE(kept.Prefill(all, ids, 5).ok());
    EXPECT_EQ(kept.pool().blocks_held(all, KvGroup::kSliding), (static_cast<int64_t>(ids.size()) + B - 1) / B)
        << name;
  }
}

TEST(ModelKv, MoreBitsNeverLoseToFewerAndEveryModeIsReported) {
  const char* const kModes[] = {"plain:bf16", "affine:8", "affine:4", "affine:4:32", "turbo:k8v3", "turbo:k4v3"};
  for (const std::string& name : testing::kFixtureModels) {
    std::map<std::string, double> kl, top1;
    const int kPrompts = 2;
    testing::ModelRunner plain(name, "plain");
    ASSERT_TRUE(plain.ok());
    const int64_t V = plain.vocab();
    std::map<std::string, std::unique_ptr<testing::ModelRunner>> runners;
    for (const char* mode : kModes) runners[mode] = std::make_unique<testing::ModelRunner>(name, mode);
    for (uint32_t prompt = 0; prompt < kPrompts; ++prompt) {
      const auto ids = Ids(44, 100 + prompt, V);
      const auto ref = TeacherForced(plain, ids, 16, 16);
      for (const char* mode : kModes) {
        const auto got = TeacherForced(*runners[mode], ids, 16, 16);
        const auto [k, t] = KlAndTop1(ref, got, V);
        kl[mode] += k / kPrompts;
        top1[mode] += t / kPrompts;
      }
    }
    for (const char* mode : kModes) {
      std::printf("[ %s %-11s ] KL vs plain %.3e, top-1 agreement %.3f\n", name.c_str(), mode, kl[mode],
                  top1[mode]);
      EXPECT_TRUE(std::isfinite(kl[mode]));
      EXPECT_GT(kl[mode], 0.0) << name << " " << mode << " should not be lossless";
    }
    EXPECT_LE(kl["plain:bf16"], kl["affine:8"]) << name;
    EXPECT_LE(kl["affine:8"], kl["affine:4"]) << name;
    EXPECT_LE(kl["turbo:k8v3"], kl["turbo:k4v3"]) << name;
  }
}

TEST(ModelKv, DelayedModesAreBitIdenticalToPlainBeforeTheirBoundary) {
  for (const std::string& name : testing::kFixtureModels) {
    testing::ModelRunner plain(name, "plain");
    ASSERT_TRUE(plain.ok());
    const int64_t V = plain.vocab();
    const auto ids = Ids(48, 11, V);
    const auto ref = TeacherForced(plain, ids, 10, 10);
    for (const char* mode : {"affine:4@24", "turbo:k4v3@24", "affine:8:32@24"}) {
      testing::ModelRunner r(name, mode);
      ASSERT_TRUE(r.ok());
      std::vector<float> got = TeacherForced(r, ids, 10, 10);
      // Row i is computed while the sequence holds i tokens: plain up to 23.
      EXPECT_EQ(std::memcmp(ref.data(), got.data(), 24 * V * sizeof(float)), 0) << name << " " << mode;
      EXPECT_NE(std::memcmp(ref.data() + 24 * V, got.data() + 24 * V, 24 * V * sizeof(float)), 0)
          << name << " " << mode << " never converted";
    }
  }
}

}  // namespace
}  // namespace g4
