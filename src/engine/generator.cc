#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace g4 {
namespace {
double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

Generator::Generator(ModelBundle& bundle) : bundle_(bundle) { Reset(); }

void Generator::Reset() {
  kv_ = SequenceKv::MakePlain(bundle_.model->config());
  cached_.clear();
}

StatusOr<GenerateResult> Generator::Generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                             const std::function<void(std::string_view)>& on_text,
                                             const std::atomic<bool>* cancel) {
  Gemma4Model& model = *bundle_.model;
  const int V = model.vocab_size();
  if (prompt.empty()) return InvalidArgument("[generate] empty prompt");
  for (int32_t id : prompt)
    if (id < 0 || id >= V) return InvalidArgument("[generate] prompt token id " + std::to_string(id) + " outside the vocabulary");
  G4_RETURN_IF_ERROR(ValidateSamplingParams(options.sampling, V));
  if (options.max_tokens < 0) return InvalidArgument("[generate] max_tokens must be >= 0");

  // Reuse the cache when it holds a strict prefix of the prompt (at least one
  // new token must run to produce logits); anything else starts over.
  const bool extends = cached_.size() < prompt.size() && std::equal(cached_.begin(), cached_.end(), prompt.begin());
  if (!extends) Reset();
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  result.reused_tokens = static_cast<int>(cached_.size());

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits(V);
  const size_t fresh = prompt.size() - cached_.size();
  G4_RETURN_IF_ERROR(
      model.ForwardChunked(prompt.data() + cached_.size(), fresh, options.prefill_chunk, *kv_, logits.data(), false));
  cached_ = prompt;
  result.prefill_seconds = Since(t0);

  Sampler sampler(options.sampling, V);
  StopMatcher stops(options.stop_ids, options.stop_strings);
  StreamDecoder decoder(*bundle_.tokenizer);
  std::vector<int> context(prompt.begin(), prompt.end());
  const auto t1 = std::chrono::steady_clock::now();
  result.finish_reason = "length";
  for (int step = 0; step < options.max_tokens; ++step) {
    if (cancel && cancel->load()) {
      result.finish_reason = "cancelled";
      break;
    }
    const int token = sampler.Sample(logits.data(), context);
    StopMatcher::Step s = stops.Feed(token, decoder.Push(token));
    if (!s.text.empty()) {
      result.text += s.text;
      if (on_text) on_text(s.text);
    }
    if (s.stopped) {
      result.finish_reason = "stop";
      break;
    }
    result.tokens.push_back(token);
    context.push_back(token);
    if (step + 1 == options.max_tokens) break;  // no need to run the last token
    const int32_t id = token;
    G4_RETURN_IF_ERROR(model.Forward(&id, 1, *kv_, logits.data(), false));
    cached_.push_back(id);
  }
  if (result.finish_reason != "stop") {
    std::string rest = stops.Feed(-1, decoder.Finish()).text + stops.Flush();
    if (!rest.empty()) {
      result.text += rest;
      if (on_text) on_text(rest);
    }
  }
  result.decode_seconds = Since(t1);
  return result;
}

}  // namespace g4
