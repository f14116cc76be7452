// The forward pass against transformers' float32 goldens for every tiny
// fixture model (testdata/models/*: HF text, HF multimodal, MLX quantized,
// PLE + KV sharing, K=V, MoE).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>

#include "backend/ops.h"
#include "io/safetensors.h"
#include "model/gemma4_model.h"
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
    ops_ = MakeCpuOps();
    auto m = Gemma4Model::Load(dir_, ops_.get());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    auto g = SafetensorsFile::Open(dir_ + "/golden.safetensors");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    golden_.file = std::move(g).value();
  }

  std::vector<float> Prefill(const std::vector<int32_t>& ids, int64_t chunk, SequenceKv* kv = nullptr) {
    std::unique_ptr<SequenceKv> own;
    if (!kv) {
      own = SequenceKv::MakePlain(model_->config());
      kv = own.get();
    }
    std::vector<float> logits(ids.size() * model_->vocab_size());
    Status s = model_->ForwardChunked(ids.data(), ids.size(), chunk, *kv, logits.data(), true);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return logits;
  }

  std::string dir_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Gemma4Model> model_;
  Golden golden_;
};

TEST_P(GoldenTest, PromptLogitsMatchTransformers) {
  for (const char* c : {"short", "long"}) {
    const auto ids = golden_.Ids(std::string(c) + ".ids");
    const auto want = golden_.Floats(std::string(c) + ".logits");
    ASSERT_EQ(want.size(), ids.size() * model_->vocab_size());
    const auto got = Prefill(ids, 1 << 20);
    auto m = testing::Compare(want.data(), got.data(), want.size(), 1e-3);
    EXPECT_TRUE(m.ok) << c << ": " << m.ToString();
    RecordProperty(std::string(c) + "_max_abs_diff", std::to_string(m.max_abs_diff));
    std::printf("[ %s %s ] max |dlogit| = %.3g\n", GetParam().c_str(), c, m.max_abs_diff);
  }
}

TEST_P(GoldenTest, GreedyDecodeMatchesTransformers) {
  const auto ids = golden_.Ids("long.ids");
  const auto want_ids = golden_.Ids("long.greedy_ids");
  const auto want_logits = golden_.Floats("long.greedy_logits");
  const int64_t V = model_->vocab_size();
  auto kv = SequenceKv::MakePlain(model_->config());
  std::vector<float> logits(V);
  ASSERT_TRUE(model_->Forward(ids.data(), ids.size(), *kv, logits.data(), false).ok());
  double worst = 0;
  for (size_t step = 0; step < want_ids.size(); ++step) {
    auto m = testing::Compare(&want_logits[step * V], logits.data(), V, 1e-3);
    EXPECT_TRUE(m.ok) << "step " << step << ": " << m.ToString();
    worst = std::max(worst, m.max_abs_diff);
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ASSERT_EQ(next, want_ids[step]) << "greedy token differs at step " << step;
    ASSERT_TRUE(model_->Forward(&next, 1, *kv, logits.data(), false).ok());
  }
  std::printf("[ %s greedy ] max |dlogit| = %.3g over %zu steps\n", GetParam().c_str(), worst, want_ids.size());
}

TEST_P(GoldenTest, ChunkedPrefillEqualsSinglePass) {
  const auto ids = golden_.Ids("long.ids");
  const auto whole = Prefill(ids, 1 << 20);
  for (int64_t chunk : {1, 3, 8}) {
    const auto got = Prefill(ids, chunk);
    auto m = testing::Compare(whole.data(), got.data(), whole.size(), 1e-5, 1e-5);
    EXPECT_TRUE(m.ok) << "chunk " << chunk << ": " << m.ToString();
  }
}

TEST_P(GoldenTest, TeacherForcedDecodeEqualsPrefill) {
  // Prefill the first 20 tokens, then feed the rest one at a time through the
  // cache; every row must equal the single-pass prefill of the whole prompt.
  const auto ids = golden_.Ids("long.ids");
  const int64_t V = model_->vocab_size();
  const auto whole = Prefill(ids, 1 << 20);
  auto kv = SequenceKv::MakePlain(model_->config());
  std::vector<float> logits(V);
  const size_t head = 20;
  ASSERT_TRUE(model_->Forward(ids.data(), head, *kv, logits.data(), false).ok());
  auto m = testing::Compare(&whole[(head - 1) * V], logits.data(), V, 1e-5, 1e-5);
  EXPECT_TRUE(m.ok) << m.ToString();
  for (size_t i = head; i < ids.size(); ++i) {
    ASSERT_TRUE(model_->Forward(&ids[i], 1, *kv, logits.data(), false).ok());
    auto mi = testing::Compare(&whole[i * V], logits.data(), V, 1e-5, 1e-5);
    EXPECT_TRUE(mi.ok) << "position " << i << ": " << mi.ToString();
  }
}

TEST_P(GoldenTest, Float32AgreesWithBf16Reference) {
  // transformers run in bfloat16 rounds every op; our float32 path must stay
  // within that run's envelope: small RMS difference relative to the logits'
  // spread, and the same top token wherever the bf16 run's top-2 gap is
  // wider than the envelope.
  if (!golden_.file->Find("short.logits_bf16")) GTEST_SKIP() << "no bf16 golden for this model";
  const int64_t V = model_->vocab_size();
  for (const char* c : {"short", "long"}) {
    const auto ids = golden_.Ids(std::string(c) + ".ids");
    const auto want = golden_.Floats(std::string(c) + ".logits_bf16");
    const auto got = Prefill(ids, 1 << 20);
    double diff2 = 0, norm2 = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff2 += (got[i] - want[i]) * (got[i] - want[i]);
      norm2 += want[i] * want[i];
    }
    const double rel = std::sqrt(diff2 / norm2);
    EXPECT_LT(rel, 0.1) << c;
    int decisive = 0, agree = 0;
    for (size_t row = 0; row < ids.size(); ++row) {
      const float* w = &want[row * V];
      const float* g = &got[row * V];
      std::vector<float> sorted(w, w + V);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] < 1.0f) continue;  // inside the bf16 envelope: either answer is right
      ++decisive;
      agree += (std::max_element(w, w + V) - w) == (std::max_element(g, g + V) - g);
    }
    EXPECT_EQ(agree, decisive) << c;
    std::printf("[ %s %s bf16 ] relative RMS diff %.3g, top-1 agrees on %d/%d decisive rows\n",
                GetParam().c_str(), c, rel, agree, decisive);
  }
}

TEST_P(GoldenTest, OutOfVocabularyIdIsRejected) {
  auto kv = SequenceKv::MakePlain(model_->config());
  std::vector<float> logits(model_->vocab_size());
  const int32_t bad[] = {1, model_->vocab_size()};
  Status s = model_->Forward(bad, 2, *kv, logits.data(), false);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the vocabulary"), std::string::npos) << s.message();
  EXPECT_EQ(kv->position(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest,
                         ::testing::Values("tiny-e", "tiny-e2", "tiny-dense", "tiny-moe", "tiny-e-q4",
                                           "tiny-moe-q4"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace g4
