// The batching contract, end to end through the scheduler: for every
// fixture model and KV mode, sequences of different lengths run together --
// prompt chunks and decode rows mixed in one step, joining and leaving at
// different steps -- produce bit for bit the logits and greedy tokens each
// produces alone.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "test_backend.h"
#include "test_util.h"

namespace g4 {
namespace {

class RecordSink final : public SequenceSink {
 public:
  void OnLogits(int64_t index, std::span<const float> logits) override {
    rows.emplace_back(index, std::vector<float>(logits.begin(), logits.end()));
  }
  bool OnToken(int32_t token, const LogProbs*) override {
    tokens.push_back(token);
    return true;
  }
  void OnFinish(FinishReason r, KvSeq, const Status& s) override {
    reason = r;
    status = s;
    done = true;
  }
  std::vector<std::pair<int64_t, std::vector<float>>> rows;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kError;
  Status status;
  bool done = false;
};

struct Job {
  std::vector<int32_t> prompt;
  int max_new = 0;
};

SequenceRequest Request(const Job& job, SequenceSink* sink) {
  SequenceRequest r;
  r.prompt = job.prompt;
  r.max_new_tokens = job.max_new;
  r.sampling.temperature = 0;
  r.logits_from = 0;
  r.sink = sink;
  return r;
}

class BatchInvarianceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = testing::MakeTestBackend();
    auto m = Gemma4Model::Load(testing::TestDataPath("models/" + GetParam()), *backend_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    std::mt19937 rng(17);
    const int lengths[] = {3, 26, 11, 40, 1, 17};
    const int news[] = {9, 4, 14, 2, 11, 6};
    for (int i = 0; i < 6; ++i) {
      Job j;
      for (int t = 0; t < lengths[i]; ++t) j.prompt.push_back(static_cast<int32_t>(rng() % model_->vocab_size()));
      j.max_new = news[i];
      jobs_.push_back(j);
    }
  }

  std::unique_ptr<Engine> MakeEngine(const std::string& kv, int max_seqs, int64_t step_tokens) {
    EngineOptions o;
    o.kv = kv;
    o.max_seqs = max_seqs;
    o.max_step_tokens = step_tokens;
    o.max_outputs = step_tokens;
    o.kv_budget_bytes = size_t{32} << 20;
    o.block_size = 4;
    auto e = Engine::Create(*model_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Gemma4Model> model_;
  std::vector<Job> jobs_;
};

TEST_P(BatchInvarianceTest, EverySequenceGetsItsSoloLogitsAndTokens) {
  const char* const kModes[] = {"plain",       "plain:bf16",     "affine:8",     "affine:4:32",
                                "turbo:k8v3",  "turbo:k4v3",     "affine:8@12",  "turbo:k8v3@20",
                                "affine:4:32@5", "plain:bf16@9"};
  for (const char* mode : kModes) {
    // Alone: one sequence at a time, whole prompts in one step.
    std::vector<RecordSink> solo(jobs_.size());
    {
      auto engine = MakeEngine(mode, 1, 64);
      ASSERT_TRUE(engine);
      for (size_t i = 0; i < jobs_.size(); ++i) {
        ASSERT_TRUE(engine->scheduler().Submit(Request(jobs_[i], &solo[i])).ok());
        ASSERT_TRUE(engine->scheduler().RunUntilIdle().ok());
        ASSERT_TRUE(solo[i].done && solo[i].status.ok()) << mode << " job " << i;
      }
    }
    // Together: a small step budget mixes prompt chunks and decode rows;
    // jobs join over several steps and leave at different steps.
    std::vector<RecordSink> batch(jobs_.size());
    {
      auto engine = MakeEngine(mode, 4, 13);
      ASSERT_TRUE(engine);
      Scheduler& s = engine->scheduler();
      size_t next = 0;
      for (int step = 0; s.HasWork() || next < jobs_.size(); ++step) {
        if (next < jobs_.size() && step % 3 == 0) {
          ASSERT_TRUE(s.Submit(Request(jobs_[next], &batch[next])).ok());
          ++next;
        }
        ASSERT_TRUE(s.Step().ok());
      }
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      ASSERT_TRUE(batch[i].done && batch[i].status.ok()) << mode << " job " << i;
      EXPECT_EQ(batch[i].tokens, solo[i].tokens) << GetParam() << " " << mode << " job " << i;
      ASSERT_EQ(batch[i].rows.size(), solo[i].rows.size()) << mode << " job " << i;
      for (size_t r = 0; r < solo[i].rows.size(); ++r) {
        ASSERT_EQ(batch[i].rows[r].first, solo[i].rows[r].first);
        const auto& a = batch[i].rows[r].second;
        const auto& b = solo[i].rows[r].second;
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
            << GetParam() << " " << mode << " job " << i << " row " << r << ": batched logits differ from solo";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvarianceTest, ::testing::ValuesIn(testing::kFixtureModels),
                         [](const auto& info) { return testing::FixtureTestName(info.param); });

}  // namespace
}  // namespace g4
