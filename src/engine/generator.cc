#include "engine/generator.h"

#include <algorithm>

#include "engine/text_sink.h"

namespace g4 {

Generator::Generator(Engine& engine, const Tokenizer& tokenizer) : engine_(engine), tokenizer_(tokenizer) {}

void Generator::Reset() {
  kv_ = KvSeq();
  cached_.clear();
}

void Generator::Adopt(KvSeq kv, std::vector<int32_t> tokens) {
  kv_ = std::move(kv);
  cached_ = std::move(tokens);
}

StatusOr<GenerateResult> Generator::Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                             const std::function<void(std::string_view)>& on_text,
                                             const std::atomic<bool>* cancel) {
  if (prompt.empty()) return InvalidArgument("[generate] empty prompt");
  if (options.max_tokens < 0) return InvalidArgument("[generate] max_tokens must be >= 0");
  // Reuse the KV when it holds a strict prefix of the prompt (at least one
  // new token must run to produce logits); anything else starts over.
  const bool extends = kv_.valid() && cached_.size() < prompt.size() &&
                       std::equal(cached_.begin(), cached_.end(), prompt.begin());
  if (!extends) Reset();
  TextSink sink(tokenizer_, options.stop_ids, options.stop_strings, on_text, cancel);
  SequenceRequest req;
  req.seq = std::move(kv_);
  req.prompt.assign(prompt.begin() + static_cast<int64_t>(cached_.size()), prompt.end());
  req.history = cached_;
  req.max_new_tokens = options.max_tokens;
  req.sampling = options.sampling;
  req.stop_ids.assign(options.stop_ids.begin(), options.stop_ids.end());
  req.top_logprobs = options.top_logprobs;
  req.sink = &sink;
  const int reused = static_cast<int>(cached_.size());
  Scheduler& scheduler = engine_.scheduler();
  StatusOr<RequestId> id = scheduler.Submit(std::move(req));
  if (!id.ok()) {
    Reset();
    return id.status();
  }
  while (!sink.finished()) G4_RETURN_IF_ERROR(scheduler.Step());
  G4_RETURN_IF_ERROR(sink.status());
  GenerateResult result = std::move(sink.result());
  result.prompt_tokens = static_cast<int>(prompt.size());
  result.reused_tokens = reused;
  if (options.max_tokens == 0) result.finish_reason = "length";
  kv_ = sink.TakeSeq();
  // The KV holds the prompt and every generated token that was run (the
  // last one is not run when generation stops on it).
  cached_ = prompt;
  cached_.insert(cached_.end(), result.tokens.begin(), result.tokens.end());
  if (kv_.valid()) {
    cached_.resize(std::min<size_t>(cached_.size(), static_cast<size_t>(kv_.length())));
  } else {
    cached_.clear();
  }
  return result;
}

}  // namespace g4
