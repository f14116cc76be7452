// The sampling flags `g4 generate` and `g4 chat` share (llama.cpp / mlx_lm
// spellings), resolved against the model's generation_config.json defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_bundle.h"
#include "backend/sampler.h"

namespace g4::cli {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  int repetition_context = 20;
  float presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  int max_tokens = 512;
  std::vector<std::string> stop;
};

void AddSamplingFlags(CLI::App& app, SamplingFlags& flags);
// Flags over generation_config.json over the sampler's defaults.
SamplingParams ResolveSampling(const SamplingFlags& flags, const ModelBundle& bundle);

}  // namespace g4::cli
