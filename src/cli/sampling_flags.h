// The sampling flags `g4 generate` and `g4 chat` share (llama.cpp / mlx_lm
// spellings), resolved against the model's generation_config.json defaults.
//
// Seeds: --seed S fixes the draws; no --seed (or --seed -1) draws a random
// seed here, so it can be printed with -v and given back to reproduce a run.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/sampler.h"
#include "engine/model_bundle.h"

namespace g4::cli {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  int repetition_context = 20;
  float presence_penalty = 0, frequency_penalty = 0;
  float xtc_probability = 0, xtc_threshold = 0.1f;
  std::vector<std::string> logit_bias;  // "ID=BIAS", one per use
  int64_t seed = -1;                    // -1: random
  int max_tokens = 512;
  std::vector<std::string> stop;        // one per use
};

void AddSamplingFlags(CLI::App& app, SamplingFlags& flags);

// "ID=BIAS" items (BIAS a number, or -inf to ban the token) -> a map; a
// usage status naming the bad item.
StatusOr<std::map<int, float>> ParseLogitBias(const std::vector<std::string>& items);

// Flags over generation_config.json over the sampler's defaults, with the
// seed resolved (drawn when random) and XTC sparing the model's stop ids and
// "\n". A usage status for values the sampler refuses (ids outside the
// vocabulary, top_p outside (0, 1], ...).
StatusOr<SamplingParams> ResolveSampling(const SamplingFlags& flags, const ModelBundle& bundle);

// A random 63-bit seed (std::random_device): fits --seed.
uint64_t RandomSeed();

// "temperature 1 top_k 64 top_p 0.95 min_p 0 ... seed 123" for -v.
std::string DescribeSampling(const SamplingParams& p);

}  // namespace g4::cli
