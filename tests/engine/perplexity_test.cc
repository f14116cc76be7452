// Perplexity (llama.cpp's method) against a direct computation: each window
// run in one forward pass from an empty cache, the log-softmax of every
// scored position taken in double precision.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine_test_util.h"
#include "test_backend.h"
#include "test_util.h"

namespace g4 {
namespace {

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = testing::MakeTestBackend();
    auto m = Gemma4Model::Load(testing::TestDataPath("models/tiny-e"), *backend_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> id(3, model_->vocab_size() - 1);
    tokens_.resize(203);
    for (int32_t& t : tokens_) t = id(rng);
  }

  // Mean NLL over windows of ctx, second halves scored, first token -> bos.
  double DirectMeanNll(int64_t ctx, int32_t bos, int64_t* count) {
    const int64_t V = model_->vocab_size();
    double sum = 0;
    *count = 0;
    for (int64_t w = 0; w + 1 <= static_cast<int64_t>(tokens_.size()) / ctx; ++w) {
      std::vector<int32_t> win(tokens_.begin() + w * ctx, tokens_.begin() + (w + 1) * ctx);
      win[0] = bos;
      auto solo = testing::RunSolo(*model_, win, ctx);
      EXPECT_TRUE(solo.ok()) << solo.status().ToString();
      const std::vector<float> logits = solo.ok() ? solo->logits : std::vector<float>(ctx * V);
      for (int64_t p = ctx / 2; p <= ctx - 2; ++p) {
        const float* row = &logits[p * V];
        double m = row[0];
        for (int64_t j = 0; j < V; ++j) m = std::max(m, static_cast<double>(row[j]));
        double s = 0;
        for (int64_t j = 0; j < V; ++j) s += std::exp(row[j] - m);
        sum += m + std::log(s) - row[win[p + 1]];
        ++*count;
      }
    }
    return sum / *count;
  }

  std::unique_ptr<Engine> MakeEngine(const std::string& kv, int64_t chunk, int max_seqs = 4) {
    EngineOptions o;
    o.kv = kv;
    o.max_step_tokens = chunk;
    o.max_outputs = chunk;
    o.max_seqs = max_seqs;
    o.kv_budget_bytes = size_t{32} << 20;
    auto e = Engine::Create(*model_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Gemma4Model> model_;
  std::vector<int32_t> tokens_;
};

TEST_F(PerplexityTest, MatchesDirectComputationForEveryChunking) {
  int64_t count = 0;
  const double direct = DirectMeanNll(48, 2, &count);
  ASSERT_EQ(count, 4 * (48 - 1 - 24));  // 203 tokens: 4 windows of 48
  for (int64_t chunk : {48, 24, 7, 1}) {
    PerplexityOptions o;
    o.ctx = 48;
    o.bos_id = 2;
    int64_t calls = 0;
    auto engine = MakeEngine("plain", chunk);
    auto st = ComputePerplexity(*engine, nullptr, tokens_, o, [&](int64_t, const PerplexityStats&) { ++calls; });
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->windows, 4);
    EXPECT_EQ(calls, 4);
    EXPECT_EQ(st->count, count);
    EXPECT_NEAR(st->MeanNll(), direct, 1e-4) << "chunk " << chunk;
    EXPECT_NEAR(st->Ppl(), std::exp(direct), 1e-4 * std::exp(direct));
    EXPECT_GT(st->PplError(), 0);
    EXPECT_FALSE(st->has_reference);
  }
}

TEST_F(PerplexityTest, KlAgainstItselfIsZeroAndAgainstQuantizedCachesSmallButPositive) {
  auto plain = MakeEngine("plain", 16), plain_ref = MakeEngine("plain", 16), q4 = MakeEngine("affine:4:32", 16);
  PerplexityOptions o;
  o.ctx = 64;
  o.bos_id = 2;
  auto same = ComputePerplexity(*plain, plain_ref.get(), tokens_, o);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->has_reference);
  EXPECT_NEAR(same->MeanKl(), 0.0, 1e-9);
  EXPECT_EQ(same->top1_agree, same->count);
  EXPECT_DOUBLE_EQ(same->RefPpl(), same->Ppl());

  auto quant = ComputePerplexity(*q4, plain_ref.get(), tokens_, o);
  ASSERT_TRUE(quant.ok()) << quant.status().ToString();
  EXPECT_GT(quant->MeanKl(), 1e-6);
  EXPECT_LT(quant->MeanKl(), 1.0);
  EXPECT_NEAR(quant->RefPpl(), same->Ppl(), 1e-9 * same->Ppl());
  EXPECT_NE(quant->Ppl(), quant->RefPpl());
}

TEST_F(PerplexityTest, WindowCountsAndErrors) {
  PerplexityOptions o;
  o.ctx = 50;
  EXPECT_EQ(PerplexityWindows(203, o), 4);
  o.max_windows = 2;
  EXPECT_EQ(PerplexityWindows(203, o), 2);
  auto plain = MakeEngine("plain", 50);
  o.max_windows = 0;
  o.ctx = 500;  // longer than the text
  EXPECT_EQ(ComputePerplexity(*plain, nullptr, tokens_, o).status().code(), StatusCode::kInvalidArgument);
  o.ctx = 2;
  EXPECT_EQ(ComputePerplexity(*plain, nullptr, tokens_, o).status().code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> bad = tokens_;
  bad[60] = model_->vocab_size();  // out of the vocabulary
  o.ctx = 50;
  EXPECT_FALSE(ComputePerplexity(*plain, nullptr, bad, o).ok());
}

}  // namespace
}  // namespace g4
