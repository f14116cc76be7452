#include "server/prompt_builder.h"

#include <algorithm>

#include "tokenizer/chat_format.h"

namespace g4::server {

StatusOr<std::vector<int32_t>> ChatPromptIds(const ChatRequest& r, const ModelBundle& bundle) {
  ChatOptions options;
  options.enable_thinking = r.enable_thinking;
  options.empty_thought_channel = bundle.empty_thought_channel;
  options.tools = r.tools;
  options.add_generation_prompt = !r.continue_last;
  G4_ASSIGN_OR_RETURN(std::string text, RenderChat(r.messages, options));
  if (r.continue_last) {
    constexpr std::string_view kEnd = "<turn|>\n";
    if (text.size() >= kEnd.size() && text.compare(text.size() - kEnd.size(), kEnd.size(), kEnd) == 0)
      text.resize(text.size() - kEnd.size());
  }
  return bundle.tokenizer->Encode(text);
}

std::vector<int> ChatStopIds(const ChatRequest& r, const ModelBundle& bundle) {
  std::vector<int> ids = bundle.ChatStopIds();
  if (!r.tools.empty())
    if (auto id = bundle.tokenizer->AddedTokenId("<|tool_response>")) ids.push_back(*id);
  return ids;
}

StatusOr<std::vector<int32_t>> CompletionPromptIds(const CompletionPrompt& p, const ModelBundle& bundle) {
  if (p.is_ids) return p.ids;
  G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, bundle.tokenizer->Encode(p.text));
  const Tokenizer& tok = *bundle.tokenizer;
  if (tok.add_bos_token() && tok.bos_id() >= 0 && (ids.empty() || ids[0] != tok.bos_id()))
    ids.insert(ids.begin(), tok.bos_id());
  return ids;
}

StatusOr<JobSpec> MakeJobSpec(const GenerationRequest& r, std::vector<int32_t> prompt, std::vector<int> stop_ids,
                              const ModelBundle& bundle, const ServingLimits& limits) {
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt == 0) return InvalidArgument("[request] the prompt is empty");
  if (limits.context > 0 && n_prompt >= limits.context)
    return InvalidArgument("[request] the prompt is " + std::to_string(n_prompt) +
                           " tokens; the model's context is " + std::to_string(limits.context));
  int64_t max_tokens = r.max_tokens.value_or(limits.default_max_tokens);
  if (limits.context > 0) {
    if (!r.max_tokens) max_tokens = std::min(max_tokens, limits.context - n_prompt);
    if (n_prompt + max_tokens > limits.context)
      return InvalidArgument("[request] the prompt (" + std::to_string(n_prompt) + " tokens) plus max_tokens (" +
                             std::to_string(max_tokens) + ") exceeds the model's context of " +
                             std::to_string(limits.context) + " tokens");
  }
  const int vocab = bundle.model->vocab_size();
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      return InvalidArgument("[request] token id " + std::to_string(id) + " is outside the vocabulary (size " +
                             std::to_string(vocab) + ")");
  JobSpec spec;
  spec.prompt = std::move(prompt);
  spec.n = r.n;
  spec.max_tokens = static_cast<int>(max_tokens);
  spec.stop_ids = std::move(stop_ids);
  spec.stop_strings = r.stop;
  spec.top_logprobs = r.logprobs ? r.top_logprobs : -1;
  SamplingParams& p = spec.sampling;
  ApplyGenerationDefaults(bundle.generation, r.sampling.overrides, p);
  p.presence_penalty = r.sampling.presence_penalty;
  p.frequency_penalty = r.sampling.frequency_penalty;
  p.seed = r.sampling.seed;
  p.logit_bias = r.sampling.logit_bias;
  p.top_logprobs = std::max(0, spec.top_logprobs);
  G4_RETURN_IF_ERROR(ValidateSamplingParams(p, bundle.model->vocab_size()));
  return spec;
}

}  // namespace g4::server
