// TextSink: a SequenceSink that turns sampled tokens into text the way a
// user sees it: UTF-8 completed across tokens, stop strings held back and
// never shown, optional streaming callback, and a GenerateResult with
// timings. Used by Generator, `g4 generate --prompts` and the server.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace g4 {

struct GenerateResult {
  std::string text;             // what was streamed (stop strings excluded)
  std::vector<int32_t> tokens;  // generated ids, the stop id excluded
  std::string finish_reason;    // "stop", "length", "cancelled" or "error"
  int prompt_tokens = 0;
  int reused_tokens = 0;        // prompt tokens served from the cache
  double prefill_seconds = 0;   // from the sink's creation to the first token (TTFT)
  double decode_seconds = 0;
  std::vector<LogProbs> logprobs;  // per generated token, when asked for
};

class TextSink final : public SequenceSink {
 public:
  // `tokenizer` and `on_text` must outlive the sink; `cancel` (may be null)
  // ends generation at the next token, keeping the KV.
  TextSink(const Tokenizer& tokenizer, std::vector<int> stop_ids, std::vector<std::string> stop_strings,
           std::function<void(std::string_view)> on_text = {}, const std::atomic<bool>* cancel = nullptr);

  bool OnToken(int32_t token, const LogProbs* logprobs) override;
  void OnFinish(FinishReason reason, KvSeq seq, const Status& status) override;

  bool finished() const { return finished_; }
  const Status& status() const { return status_; }
  GenerateResult& result() { return result_; }
  KvSeq TakeSeq() { return std::move(seq_); }

 private:
  void Emit(const std::string& text);

  StopMatcher stops_;
  StreamDecoder decoder_;
  std::function<void(std::string_view)> on_text_;
  const std::atomic<bool>* cancel_;
  GenerateResult result_;
  std::chrono::steady_clock::time_point start_, decode_start_;
  bool finished_ = false, cancelled_ = false, stopped_by_text_ = false;
  Status status_;
  KvSeq seq_;
};

}  // namespace g4
