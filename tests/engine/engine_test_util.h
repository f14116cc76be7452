// Test helpers over the engine: run one sequence through a fresh Engine and
// collect its logits rows and greedy tokens.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"

namespace g4::testing {

class CollectSink final : public SequenceSink {
 public:
  explicit CollectSink(int64_t vocab) : vocab_(vocab) {}
  void OnLogits(int64_t index, std::span<const float> logits) override {
    if (static_cast<int64_t>(rows.size()) < (index + 1) * vocab_) rows.resize((index + 1) * vocab_);
    std::copy(logits.begin(), logits.end(), rows.begin() + index * vocab_);
  }
  bool OnToken(int32_t token, const LogProbs*) override {
    tokens.push_back(token);
    return true;
  }
  void OnFinish(FinishReason, KvSeq, const Status& s) override { status = s; }
  std::vector<float> rows;  // [index, V]
  std::vector<int32_t> tokens;
  Status status;

 private:
  int64_t vocab_;
};

struct SoloResult {
  std::vector<float> logits;    // every row run, [prompt + greedy - 1, V]
  std::vector<int32_t> greedy;  // greedy tokens
};

// Runs `prompt` (chunks of `chunk` tokens) then `greedy` greedy steps in a
// fresh engine with KV scheme `kv`.
inline StatusOr<SoloResult> RunSolo(Gemma4Model& model, const std::vector<int32_t>& prompt, int64_t chunk,
                                    int greedy = 0, const std::string& kv = "plain") {
  EngineOptions o;
  o.kv = kv;
  o.max_seqs = 1;
  o.max_step_tokens = chunk;
  o.max_outputs = chunk;
  o.kv_budget_bytes = size_t{64} << 20;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model, o));
  CollectSink sink(model.vocab_size());
  SequenceRequest req;
  req.prompt = prompt;
  req.max_new_tokens = greedy;
  req.sampling.temperature = 0;
  req.logits_from = 0;
  req.sink = &sink;
  G4_ASSIGN_OR_RETURN(RequestId id, engine->scheduler().Submit(std::move(req)));
  (void)id;
  G4_RETURN_IF_ERROR(engine->scheduler().RunUntilIdle());
  G4_RETURN_IF_ERROR(sink.status);
  return SoloResult{std::move(sink.rows), std::move(sink.tokens)};
}

}  // namespace g4::testing
