// What `g4 generate` runs: its flags, one prompt with its options (a
// --prompts line may override them), and the batched run over a prompts
// file (generate_job.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/engine_flags.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "engine/model_bundle.h"

namespace g4::cli {

struct GenerateFlags {
  CommonFlags common;
  std::string prompt, file, system, prompts_file, prompt_cache;
  bool raw = false, think = false;
  int64_t ctx = 0;      // 0: the model's max_position_embeddings
  int logprobs = -1;    // >= 0: JSON output with per-token log-probabilities
  SamplingFlags sampling;
  EngineFlags engine;
};

// One prompt: its text and what may differ per prompt in a JSON line.
struct PromptJob {
  std::string prompt, system;
  bool raw = false, think = false;
  SamplingParams sampling;
  int max_tokens = 0;
  std::vector<std::string> stop;
};

// The prompt's token ids: BOS + text (--raw) or the rendered chat turn.
StatusOr<std::vector<int32_t>> PromptIds(const ModelBundle& bundle, const PromptJob& job);
std::vector<int> StopIds(const ModelBundle& bundle, const PromptJob& job);

// The context size in effect: `ctx`, else the model's
// max_position_embeddings; 0 = no bound.
int64_t ContextSize(int64_t ctx, const ModelBundle& bundle);
// Clamps *max_tokens so prompt + answer fit the context; an error when the
// prompt alone does not fit.
Status FitContext(int64_t ctx, const ModelBundle& bundle, size_t prompt_tokens, int* max_tokens);

// --prompts FILE: every prompt through the batched engine, one JSON line each.
Status RunBatch(const GenerateFlags& f, ModelBundle& bundle, Engine& engine, const PromptJob& defaults);

}  // namespace g4::cli
