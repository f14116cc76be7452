#include "cli/sampling_flags.h"

namespace g4::cli {

void AddSamplingFlags(CLI::App& app, SamplingFlags& f) {
  app.add_option("--temp,--temperature", f.temperature, "sampling temperature (0 = greedy; default: model's)");
  app.add_option("--top-k", f.top_k, "keep the k most likely tokens (0 = off)");
  app.add_option("--top-p", f.top_p, "nucleus sampling mass (1 = off)");
  app.add_option("--min-p", f.min_p, "drop tokens below min_p x the top probability (0 = off)");
  app.add_option("--repeat-penalty", f.repetition_penalty, "repetition penalty (1 = off)");
  app.add_option("--repeat-last-n", f.repetition_context, "tokens the penalties look back over");
  app.add_option("--presence-penalty", f.presence_penalty, "subtract from tokens already present");
  app.add_option("--frequency-penalty", f.frequency_penalty, "subtract per occurrence");
  app.add_option("--seed", f.seed, "random seed (same seed, same text)");
  app.add_option("-n,--max-tokens", f.max_tokens, "maximum tokens to generate");
  app.add_option("--stop", f.stop, "stop string (repeatable); never printed");
}

SamplingParams ResolveSampling(const SamplingFlags& f, const ModelBundle& bundle) {
  SamplingParams p;
  SamplingOverrides user;
  user.temperature = f.temperature;
  user.top_p = f.top_p;
  user.top_k = f.top_k;
  user.min_p = f.min_p;
  user.repetition_penalty = f.repetition_penalty;
  ApplyGenerationDefaults(bundle.generation, user, p);
  p.repetition_context_size = f.repetition_context;
  p.presence_penalty = f.presence_penalty;
  p.presence_context_size = f.repetition_context;
  p.frequency_penalty = f.frequency_penalty;
  p.frequency_context_size = f.repetition_context;
  p.seed = f.seed;
  return p;
}

}  // namespace g4::cli
