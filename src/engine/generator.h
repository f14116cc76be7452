// Generator: one conversation over an Engine: its KV sequence and the token
// ids it holds. Each Generate call reuses the cached prefix when the new
// prompt extends it (a chat's next turn), runs the rest through the
// scheduler (chunked prefill, then decoding), and samples until a stop id, a
// stop string, the token limit, or cancellation, streaming text as it goes.
//
// Threading: one thread at a time; `cancel` may be set from another thread
// or a signal handler.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/sampler.h"
#include "engine/engine.h"
#include "engine/text_sink.h"
#include "kv/kv_pool.h"
#include "tokenizer/tokenizer.h"

namespace g4 {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 512;
  std::vector<int> stop_ids;
  std::vector<std::string> stop_strings;
  int top_logprobs = -1;  // >= 0: GenerateResult::logprobs per token
};


class Generator {
 public:
  // `engine` and `tokenizer` must outlive the generator; the generator is
  // the engine's only user while Generate runs.
  Generator(Engine& engine, const Tokenizer& tokenizer);

  // REQUIRES: prompt is non-empty. Text is passed to `on_text` as soon as
  // it is safe to show (complete UTF-8, no possible stop-string prefix).
  StatusOr<GenerateResult> Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                    const std::function<void(std::string_view)>& on_text,
                                    const std::atomic<bool>* cancel = nullptr);
  // Drops the cached conversation.
  void Reset();
  // Token ids the KV holds.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  // The conversation's KV (persistence).
  const KvSeq& kv() const { return kv_; }
  // Adopts a restored conversation: `tokens` are what `kv` holds.
  void Adopt(KvSeq kv, std::vector<int32_t> tokens);

 private:
  Engine& engine_;
  const Tokenizer& tokenizer_;
  KvSeq kv_;
  std::vector<int32_t> cached_;
};

}  // namespace g4
