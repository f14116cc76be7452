// The forward pass against transformers' float32 goldens for every tiny
// fixture model (testdata/models/*: HF text, HF multimodal, MLX quantized,
// PLE + KV sharing, K=V, MoE).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>

#include "io/safetensors.h"
#include "model/model_runner.h"
#include "test_util.h"

namespace g4 {
namespace {

struct Golden {
  std::unique_ptr<SafetensorsFile> file;
  std::vector<int32_t> Ids(const std::string& name) const {
    const TensorInfo* t = file->Find(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return {};
    std::vector<int32_t> v(t->numel());
    std::memcpy(v.data(), t->data, t->nbytes);
    return v;
  }
  std::vector<float> Floats(const std::string& name) const {
    const TensorInfo* t = file->Find(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return {};
    std::vector<float> v(t->numel());
    std::memcpy(v.data(), t->data, t->nbytes);
    return v;
  }
};

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = testing::TestDataPath("models/" + GetParam());
    runner_ = std::make_unique<testing::ModelRunner>(GetParam(), "plain", /*block_size=*/4, /*max_rows=*/64);
    ASSERT_TRUE(runner_->ok());
    auto g = SafetensorsFile::Open(dir_ + "/golden.safetensors");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    golden_.file = std::move(g).value();
  }

  std::vector<float> Prefill(const std::vector<int32_t>& ids, int64_t chunk) {
    KvSeq seq = runner_->pool().NewSequence();
    auto logits = runner_->Prefill(seq, ids, chunk);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    return logits.ok() ? *logits : std::vector<float>();
  }
  // The last row of a step over `ids` for `seq`.
  std::vector<float> Last(KvSeq& seq, std::vector<int32_t> ids) {
    auto rows = runner_->Step({{&seq, std::move(ids), false}});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? (*rows)[0] : std::vector<float>();
  }

  std::string dir_;
  std::unique_ptr<testing::ModelRunner> runner_;
  Golden golden_;
};

// Fixtures with MLX-quantized weights: the CPU backend multiplies them with
// int8-quantized activations (backend/cpu/affine_int8.h, llama.cpp's Q8
// scheme), an error of bf16's order that these random, amplifying fixtures
// grow to about 1e-2 (relative RMS) of the logits; transformers' goldens are
// float32 throughout. The reading of the quantized weights themselves is
// checked exactly by tests/backend/matmul_test.cc.
bool QuantizedFixture(const std::string& name) { return name.size() > 3 && name.substr(name.size() - 3) == "-q4"; }

// For quantized fixtures: logits within the envelope of a reduced-precision
// run, as for bf16 below (relative RMS difference under 0.1) and the same
// top token on every row where the golden's top-2 gap exceeds 1.
void ExpectWithinReducedPrecisionEnvelope(const std::vector<float>& want, const std::vector<float>& got, int64_t V,
                                          const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  const double rel = testing::RelativeRms(want.data(), got.data(), want.size());
  EXPECT_LT(rel, 0.1) << what;
  int decisive = 0, agree = 0;
  for (size_t row = 0; row < want.size() / V; ++row) {
    const float* w = &want[row * V];
    const float* g = &got[row * V];
    std::vector<float> sorted(w, w + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] < 1.0f) continue;
    ++decisive;
    agree += (std::max_element(w, w + V) - w) == (std::max_element(g, g + V) - g);
  }
  EXPECT_EQ(agree, decisive) << what;
  std::printf("[ %s ] relative RMS diff %.3g, top-1 agrees on %d/%d decisive rows\n", what.c_str(), rel, agree,
              decisive);
}

TEST_P(GoldenTest, PromptLogitsMatchTransformers) {
  for (const char* c : {"short", "long"}) {
    const auto ids = golden_.Ids(std::string(c) + ".ids");
    const auto want = golden_.Floats(std::string(c) + ".logits");
    ASSERT_EQ(want.size(), ids.size() * runner_->vocab());
    const auto got = Prefill(ids, 64);
    if (QuantizedFixture(GetParam())) {
      ExpectWithinReducedPrecisionEnvelope(want, got, runner_->vocab(), GetParam() + " " + c);
      continue;
    }
    auto m = testing::Compare(want.data(), got.data(), want.size(), 1e-3);
    EXPECT_TRUE(m.ok) << c << ": " << m.ToString();
    RecordProperty(std::string(c) + "_max_abs_diff", std::to_string(m.max_abs_diff));
    std::printf("[ %s %s ] max |dlogit| = %.3g\n", GetParam().c_str(), c, m.max_abs_diff);
  }
}

TEST_P(GoldenTest, GreedyDecodeMatchesTransformers) {
  const auto ids = golden_.Ids("long.ids");
  if (QuantizedFixture(GetParam())) {
    // Teacher-forced on the golden's greedy tokens: every step's logits in
    // the envelope (a near tie may pick the other token, so no free run).
    const auto want_ids = golden_.Ids("long.greedy_ids");
    const auto want_logits = golden_.Floats("long.greedy_logits");
    KvSeq seq = runner_->pool().NewSequence();
    std::vector<float> got = Last(seq, ids);
    for (size_t step = 0; step + 1 < want_ids.size(); ++step) {
      const std::vector<float> next = Last(seq, {want_ids[step]});
      got.insert(got.end(), next.begin(), next.end());
    }
    ExpectWithinReducedPrecisionEnvelope(want_logits, got, runner_->vocab(), GetParam() + " greedy");
    return;
  }
  const auto want_ids = golden_.Ids("long.greedy_ids");
  const auto want_logits = golden_.Floats("long.greedy_logits");
  const int64_t V = runner_->vocab();
  KvSeq seq = runner_->pool().NewSequence();
  std::vector<float> logits = Last(seq, ids);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), V);
  double worst = 0;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    auto m = testing::Compare(&want_logits[step * V], logits.data(), V, 1e-3);
    EXPECT_TRUE(m.ok) << "step " << step << ": " << m.ToString();
    worst = std::max(worst, m.max_abs_diff);
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(next, want_ids[step]) << "greedy token differs at step " << step;
    logits = Last(seq, {next});
  }
  std::printf("[ %s greedy ] max |dlogit| = %.3g over %zu steps\n", GetParam().c_str(), worst, want_ids.size());
}

TEST_P(GoldenTest, ChunkedPrefillEqualsSinglePass) {
  const auto ids = golden_.Ids("long.ids");
  const auto whole = Prefill(ids, 64);
  for (int64_t chunk : {1, 3, 8}) {
    const auto got = Prefill(ids, chunk);
    ASSERT_EQ(got.size(), whole.size());
    EXPECT_EQ(0, std::memcmp(whole.data(), got.data(), whole.size() * sizeof(float)))
        << "chunk " << chunk << ": not bit-identical to a single pass";
  }
}

TEST_P(GoldenTest, TeacherForcedDecodeEqualsPrefill) {
  // Prefill the first 20 tokens, then feed the rest one at a time through the
  // cache; every row must equal the single-pass prefill of the whole prompt.
  const auto ids = golden_.Ids("long.ids");
  const int64_t V = runner_->vocab();
  const auto whole = Prefill(ids, 64);
  KvSeq seq = runner_->pool().NewSequence();
  const size_t head = 20;
  std::vector<float> logits = Last(seq, std::vector<int32_t>(ids.begin(), ids.begin() + head));
  EXPECT_EQ(0, std::memcmp(&whole[(head - 1) * V], logits.data(), V * sizeof(float)));
  for (size_t i = head; i < ids.size(); ++i) {
    logits = Last(seq, {ids[i]});
    EXPECT_EQ(0, std::memcmp(&whole[i * V], logits.data(), V * sizeof(float))) << "position " << i;
  }
}

TEST_P(GoldenTest, Float32AgreesWithBf16Reference) {
  // transformers run in bfloat16 rounds every op; our float32 path must stay
  // within that run's envelope: small RMS difference relative to the logits'
  // spread, and the same top token wherever the bf16 run's top-2 gap is
  // wider than the envelope.
  if (!golden_.file->Find("short.logits_bf16")) GTEST_SKIP() << "no bf16 golden for this model";
  const int64_t V = runner_->vocab();
  for (const char* c : {"short", "long"}) {
    const auto ids = golden_.Ids(std::string(c) + ".ids");
    const auto want = golden_.Floats(std::string(c) + ".logits_bf16");
    const auto got = Prefill(ids, 64);
    ExpectWithinReducedPrecisionEnvelope(want, got, V, GetParam() + " " + c + " bf16");
  }
}

TEST_P(GoldenTest, OutOfVocabularyIdIsRejected) {
  KvSeq seq = runner_->pool().NewSequence();
  auto rows = runner_->Step({{&seq, {1, static_cast<int32_t>(runner_->vocab())}, false}});
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rows.status().message().find("outside the vocabulary"), std::string::npos) << rows.status().message();
  EXPECT_EQ(seq.length(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest, ::testing::ValuesIn(testing::kFixtureModels),
                         [](const auto& info) { return testing::FixtureTestName(info.param); });

}  // namespace
}  // namespace g4
