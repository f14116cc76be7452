// The scheduler's lifecycle rules: admission by KV blocks, queue limits,
// request validation, stop ids and sink stops, cancellation freeing blocks
// at once, the step budget, and the Generator's prefix reuse on top.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "engine_test_util.h"
#include "test_backend.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;

class Sink final : public SequenceSink {
 public:
  bool OnToken(int32_t token, const LogProbs*) override {
    tokens.push_back(token);
    return stop_after < 0 || static_cast<int>(tokens.size()) < stop_after;
  }
  void OnFinish(FinishReason r, KvSeq s, const Status& st) override {
    reason = r;
    if (keep) seq = std::move(s);  // else its blocks go back to the pool now
    status = st;
    done = true;
  }
  bool keep = true;
  int stop_after = -1;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kError;
  KvSeq seq;
  Status status;
  bool done = false;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = testing::MakeTestBackend();
    auto m = Gemma4Model::Load(testing::TestDataPath("models/tiny-dense"), *backend_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
  }
  std::unique_ptr<Engine> MakeEngine(size_t budget, int max_seqs = 4, int64_t step = 16) {
    EngineOptions o;
    o.kv = "plain";
    o.max_seqs = max_seqs;
    o.max_step_tokens = step;
    o.kv_budget_bytes = budget;
    o.block_size = 4;
    auto e = Engine::Create(*model_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  std::vector<int32_t> Prompt(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = static_cast<int32_t>(rng() % model_->vocab_size());
    return ids;
  }
  SequenceRequest Greedy(const std::vector<int32_t>& prompt, int max_new, SequenceSink* sink) const {
    SequenceRequest r;
    r.prompt = prompt;
    r.max_new_tokens = max_new;
    r.sampling.temperature = 0;
    r.sink = sink;
    return r;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Gemma4Model> model_;
};

TEST_F(SchedulerTest, BadRequestsAreRefusedWithoutCallingTheSink) {
  auto e = MakeEngine(size_t{8} << 20);
  Scheduler& s = e->scheduler();
  Sink sink;
  EXPECT_EQ(s.Submit(Greedy({}, 3, &sink)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Greedy({1, model_->vocab_size()}, 3, &sink)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Greedy({1, -1}, 3, &sink)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Greedy({1, 2}, -1, &sink)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(Greedy({1, 2}, 3, nullptr)).status().code(), StatusCode::kInvalidArgument);
  SequenceRequest bad_temp = Greedy({1, 2}, 3, &sink);
  bad_temp.sampling.temperature = -1;
  EXPECT_EQ(s.Submit(std::move(bad_temp)).status().code(), StatusCode::kInvalidArgument);
  // Longer than the model's context.
  EXPECT_EQ(s.Submit(Greedy({1, 2}, model_->config().max_position_embeddings, &sink)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(sink.done);
  EXPECT_FALSE(s.HasWork());
}

TEST_F(SchedulerTest, WhatCanNeverFitIsRefusedAndWhatFitsLaterWaits) {
  // A small pool: find the longest sequence it can ever hold.
  auto e = MakeEngine(size_t{1} << 20, 4, 16);
  ASSERT_TRUE(e);
  Scheduler& s = e->scheduler();
  int64_t lo = 1, hi = model_->config().max_position_embeddings;
  ASSERT_TRUE(e->pool().CouldEverFit(lo, 16));
  ASSERT_FALSE(e->pool().CouldEverFit(hi, 16)) << "pool too large for this test";
  while (lo + 1 < hi) {
    const int64_t mid = (lo + hi) / 2;
    (e->pool().CouldEverFit(mid, 16) ? lo : hi) = mid;
  }
  Sink never;
  EXPECT_EQ(s.Submit(Greedy(Prompt(10, 1), static_cast<int>(hi - 10), &never)).status().code(),
            StatusCode::kResourceExhausted);
  // Two sequences that each fill most of the pool run one after the other.
  const int tokens = static_cast<int>(lo * 6 / 10);
  ASSERT_GT(tokens, 8);
  Sink a, b;
  a.keep = b.keep = false;
  ASSERT_TRUE(s.Submit(Greedy(Prompt(tokens - 4, 2), 4, &a)).ok());
  ASSERT_TRUE(s.Submit(Greedy(Prompt(tokens - 4, 3), 4, &b)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_TRUE(a.done && b.done);
  EXPECT_EQ(a.tokens.size(), 4u);
  EXPECT_EQ(b.tokens.size(), 4u);
  EXPECT_EQ(s.stats().most_seqs, 1) << "both were admitted at once though only one fits";
}

TEST_F(SchedulerTest, TheQueueIsBounded) {
  EngineOptions o;
  o.kv = "plain";
  o.kv_budget_bytes = size_t{8} << 20;
  o.max_seqs = 2;
  o.max_step_tokens = 16;
  auto e = Engine::Create(*model_, o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  SchedulerOptions so;
  so.max_queued = 2;
  so.max_seqs = 2;
  so.max_step_tokens = 16;
  auto s = Scheduler::Create(*model_, (*e)->pool(), so);
  ASSERT_TRUE(s.ok());
  Sink x, y, z;
  EXPECT_TRUE((*s)->Submit(Greedy({1, 2, 3}, 2, &x)).ok());
  EXPECT_TRUE((*s)->Submit(Greedy({1, 2, 3}, 2, &y)).ok());
  EXPECT_EQ((*s)->Submit(Greedy({1, 2, 3}, 2, &z)).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE((*s)->RunUntilIdle().ok());
  EXPECT_TRUE((*s)->Submit(Greedy({1, 2, 3}, 2, &z)).ok());  // room again
  ASSERT_TRUE((*s)->RunUntilIdle().ok());
  EXPECT_TRUE(x.done && y.done && z.done);
}

TEST_F(SchedulerTest, CancellationFreesBlocksAtOnce) {
  auto e = MakeEngine(size_t{8} << 20);
  Scheduler& s = e->scheduler();
  Sink keep, cancel;
  auto keep_id = s.Submit(Greedy(Prompt(20, 4), 3, &keep));
  auto cancel_id = s.Submit(Greedy(Prompt(30, 5), 50, &cancel));
  ASSERT_TRUE(keep_id.ok() && cancel_id.ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(s.Step().ok());
  ASSERT_TRUE(keep.done);
  ASSERT_FALSE(cancel.done);
  const size_t with_both = e->pool().used_bytes();
  s.Cancel(*cancel_id);
  ASSERT_TRUE(s.Step().ok());
  ASSERT_TRUE(cancel.done);
  EXPECT_EQ(cancel.reason, FinishReason::kCancelled);
  EXPECT_FALSE(cancel.seq.valid());
  // Only the finished sequence (held by its sink) still holds blocks.
  EXPECT_LT(e->pool().used_bytes(), with_both);
  keep.seq = KvSeq();
  EXPECT_EQ(e->pool().used_bytes(), 0u);
  EXPECT_FALSE(s.HasWork());
}

TEST_F(SchedulerTest, StopIdsAndSinkStopsEndASequenceKeepingItsKv) {
  auto e = MakeEngine(size_t{8} << 20);
  Scheduler& s = e->scheduler();
  const auto prompt = Prompt(12, 6);
  Sink probe;
  ASSERT_TRUE(s.Submit(Greedy(prompt, 5, &probe)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  ASSERT_EQ(probe.tokens.size(), 5u);
  EXPECT_EQ(probe.reason, FinishReason::kLength);
  // The last sampled token is never run: the KV holds the prompt and 4.
  EXPECT_EQ(probe.seq.length(), 12 + 4);

  // Stopping on the third token's id: two tokens delivered, stop id not.
  Sink stopped;
  SequenceRequest r = Greedy(prompt, 5, &stopped);
  r.stop_ids = {probe.tokens[2]};
  if (probe.tokens[2] != probe.tokens[0] && probe.tokens[2] != probe.tokens[1]) {
    ASSERT_TRUE(s.Submit(std::move(r)).ok());
    ASSERT_TRUE(s.RunUntilIdle().ok());
    EXPECT_EQ(stopped.reason, FinishReason::kStop);
    EXPECT_EQ(stopped.tokens, std::vector<int32_t>(probe.tokens.begin(), probe.tokens.begin() + 2));
  }
  // A sink that says stop after two tokens.
  Sink sink_stop;
  sink_stop.stop_after = 2;
  ASSERT_TRUE(s.Submit(Greedy(prompt, 5, &sink_stop)).ok());
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_EQ(sink_stop.reason, FinishReason::kStop);
  EXPECT_EQ(sink_stop.tokens.size(), 2u);
  EXPECT_EQ(sink_stop.seq.length(), 12 + 1);
}

TEST_F(SchedulerTest, StepsStayWithinTheTokenBudgetAndDecodeRowsGoFirst) {
  auto e = MakeEngine(size_t{8} << 20, 4, 10);
  Scheduler& s = e->scheduler();
  Sink a, b, c;
  ASSERT_TRUE(s.Submit(Greedy(Prompt(7, 7), 12, &a)).ok());
  ASSERT_TRUE(s.Step().ok());  // a's whole prompt
  ASSERT_TRUE(s.Submit(Greedy(Prompt(35, 8), 2, &b)).ok());
  ASSERT_TRUE(s.Submit(Greedy(Prompt(9, 9), 2, &c)).ok());
  const size_t a_before = a.tokens.size();
  ASSERT_TRUE(s.Step().ok());
  // a decodes in the same step that b's first chunk fills the rest.
  EXPECT_EQ(a.tokens.size(), a_before + 1);
  ASSERT_TRUE(s.RunUntilIdle().ok());
  EXPECT_LE(s.stats().widest_step, 10);
  EXPECT_GE(s.stats().most_seqs, 2);
  EXPECT_TRUE(a.done && b.done && c.done);
}

TEST(Generator, ReusesTheCachedPrefixAndGivesTheSameTextAsAFreshRun) {
  auto bundle = LoadModelBundle(DemoModelDir(), "cpu");
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  EngineOptions o;
  o.max_seqs = 1;
  o.kv_budget_bytes = size_t{64} << 20;
  auto engine = Engine::Create(*(*bundle)->model, o);
  ASSERT_TRUE(engine.ok());
  const Tokenizer& tok = *(*bundle)->tokenizer;
  auto first = tok.Encode("The dictionary keeps keys");
  ASSERT_TRUE(first.ok());
  GenerateOptions go;
  go.sampling.temperature = 0;
  go.max_tokens = 8;
  Generator gen(**engine, tok);
  auto r1 = gen.Generate(*first, go, nullptr);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->reused_tokens, 0);
  EXPECT_EQ(gen.cached_tokens().size(), first->size() + r1->tokens.size() - 1);

  // The next turn extends the conversation: only the new tokens run, and the
  // answer is what a fresh conversation gives for the whole prompt.
  std::vector<int32_t> second = gen.cached_tokens();
  auto more = tok.Encode(" and values");
  ASSERT_TRUE(more.ok());
  second.insert(second.end(), more->begin(), more->end());
  auto r2 = gen.Generate(second, go, nullptr);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->reused_tokens, static_cast<int>(second.size() - more->size()));
  Generator fresh(**engine, tok);
  auto r3 = fresh.Generate(second, go, nullptr);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->reused_tokens, 0);
  EXPECT_EQ(r2->tokens, r3->tokens);
  EXPECT_EQ(r2->text, r3->text);
}

}  // namespace
}  // namespace g4
