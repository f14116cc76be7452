// Generator: one conversation's decoding state over a ModelBundle — its KV
// caches and the token ids they hold. Each Generate call reuses the cached
// prefix when the new prompt extends it (a chat's next turn), prefills the
// rest in chunks, then samples until a stop id, a stop string, the token
// limit, or cancellation, streaming text as it goes.
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

#include "engine/model_bundle.h"
#include "engine/sampler.h"
#include "kv/sequence_kv.h"

namespace g4 {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 512;
  std::vector<int> stop_ids;
  std::vector<std::string> stop_strings;
  int64_t prefill_chunk = 512;
};

struct GenerateResult {
  std::string text;             // what was streamed (stop strings excluded)
  std::vector<int32_t> tokens;  // generated ids, the stop id excluded
  std::string finish_reason;    // "stop", "length" or "cancelled"
  int prompt_tokens = 0;
  int reused_tokens = 0;        // prompt tokens served from the cache
  double prefill_seconds = 0;   // includes the first token's logits (TTFT)
  double decode_seconds = 0;
};

class Generator {
 public:
  explicit Generator(ModelBundle& bundle);

  // REQUIRES: prompt is non-empty. Text is passed to `on_text` as soon as
  // it is safe to show (complete UTF-8, no possible stop-string prefix).
  StatusOr<GenerateResult> Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                    const std::function<void(std::string_view)>& on_text,
                                    const std::atomic<bool>* cancel = nullptr);
  // Drops the cached conversation.
  void Reset();
  // Token ids the caches hold.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }

 private:
  ModelBundle& bundle_;
  std::unique_ptr<SequenceKv> kv_;
  std::vector<int32_t> cached_;
};

}  // namespace g4
