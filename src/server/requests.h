// The server's requests after parsing, whichever API they came through:
// what to render, how to sample and when to stop. The per-API parsers
// (openai_request.h, anthropic_request.h) fill these from JSON bodies; the
// handlers turn them into a prompt and a JobSpec (prompt_builder.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/sampler.h"
#include "tokenizer/chat_format.h"

namespace g4::server {

// What the user set; the rest comes from generation_config.json.
struct SamplingRequest {
  SamplingOverrides overrides;  // temperature, top_p, top_k, min_p, repetition_penalty
  float presence_penalty = 0;
  float frequency_penalty = 0;
  std::optional<uint64_t> seed;
  std::map<int, float> logit_bias;
};

struct GenerationRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;          // OpenAI stream_options.include_usage
  std::optional<int64_t> max_tokens;   // unset: the server's default, within the context
  std::vector<std::string> stop;
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  SamplingRequest sampling;
};

struct ChatRequest {
  GenerationRequest gen;
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;   // empty when tool_choice is "none"
  bool enable_thinking = false;
  // Anthropic: a last assistant message is continued (prefill) rather than
  // closed.
  bool continue_last = false;
};

struct CompletionPrompt {
  std::string text;             // when !is_ids
  std::vector<int32_t> ids;     // when is_ids
  bool is_ids = false;
};

struct CompletionRequest {
  GenerationRequest gen;
  std::vector<CompletionPrompt> prompts;  // one or more; choices are prompt-major
  bool echo = false;
};

// Limits a request is checked against while parsing.
struct RequestLimits {
  int max_n = 16;
  int max_stop = 16;
  int max_logit_bias = 1024;
  int max_top_logprobs = 20;
  int max_prompts = 16;
};

}  // namespace g4::server
