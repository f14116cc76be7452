#include "cli/sampling_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>

#include "cli/command_line.h"

namespace g4::cli {

void AddSamplingFlags(CLI::App& app, SamplingFlags& f) {
  app.add_option("--temp,--temperature", f.temperature,
                 "sampling temperature, 0 = greedy (default: the model's generation_config.json, else 1)");
  app.add_option("--top-k", f.top_k, "keep the k most likely tokens, 0 = off (default: the model's, else 0)");
  app.add_option("--top-p", f.top_p, "nucleus sampling mass, 1 = off (default: the model's, else 1)");
  app.add_option("--min-p", f.min_p, "drop tokens below min_p x the top probability, 0 = off (default: the model's, else 0)");
  app.add_option("--repeat-penalty", f.repetition_penalty, "repetition penalty, 1 = off (default: the model's, else 1)");
  app.add_option("--repeat-last-n", f.repetition_context, "tokens the penalties look back over")->capture_default_str();
  app.add_option("--presence-penalty", f.presence_penalty, "subtract from tokens already present")
      ->capture_default_str();
  app.add_option("--frequency-penalty", f.frequency_penalty, "subtract per occurrence")->capture_default_str();
  app.add_option("--xtc-probability", f.xtc_probability,
                 "XTC: chance per token of excluding the top choices, 0 = off (docs/sampling.md)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  app.add_option("--xtc-threshold", f.xtc_threshold, "XTC: tokens above this probability are excluded")
      ->check(CLI::Range(0.0f, 0.5f))
      ->capture_default_str();
  app.add_option("--logit-bias", f.logit_bias, "add BIAS to token ID's logit, as ID=BIAS (-inf bans it); repeatable")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("-s,--seed", f.seed, "random seed: the same seed gives the same text; -1 = random (shown with -v)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  app.add_option("-n,--max-tokens,--n-predict", f.max_tokens, "maximum tokens to generate")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--stop", f.stop, "stop at this text (never printed); repeat for several")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

StatusOr<std::map<int, float>> ParseLogitBias(const std::vector<std::string>& items) {
  std::map<int, float> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    auto bad = [&] { return UsageStatus("--logit-bias " + item + ": expected ID=BIAS, e.g. 107=-2.5 or 50=-inf"); };
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) return bad();
    errno = 0;
    char* end = nullptr;
    const long id = std::strtol(item.c_str(), &end, 10);
    if (end != item.c_str() + eq || errno == ERANGE || id < 0 || id > std::numeric_limits<int>::max()) return bad();
    const std::string value = item.substr(eq + 1);
    float bias;
    if (value == "-inf") {
      bias = -std::numeric_limits<float>::infinity();
    } else {
      errno = 0;
      bias = std::strtof(value.c_str(), &end);
      if (*end != '\0' || errno == ERANGE || !std::isfinite(bias)) return bad();
    }
    out[static_cast<int>(id)] = bias;
  }
  return out;
}

uint64_t RandomSeed() {
  std::random_device rd;
  const uint64_t hi = rd(), lo = rd();
  return ((hi << 32) | lo) & 0x7fffffffffffffffull;
}

StatusOr<SamplingParams> ResolveSampling(const SamplingFlags& f, const ModelBundle& bundle) {
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
  p.xtc_probability = f.xtc_probability;
  p.xtc_threshold = f.xtc_threshold;
  if (p.xtc_probability > 0) {
    // As mlx-lm: XTC never removes the end of a turn or a line break.
    p.xtc_exempt_tokens = bundle.ChatStopIds();
    if (auto nl = bundle.tokenizer->AddedTokenId("\n")) p.xtc_exempt_tokens.push_back(*nl);
  }
  G4_ASSIGN_OR_RETURN(p.logit_bias, ParseLogitBias(f.logit_bias));
  p.seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : RandomSeed();
  Status valid = ValidateSamplingParams(p, static_cast<int>(bundle.model->vocab_size()));
  if (!valid.ok()) return UsageStatus(valid.message());
  return p;
}

std::string DescribeSampling(const SamplingParams& p) {
  std::ostringstream s;
  s << "temperature " << p.temperature << ", top_k " << p.top_k << ", top_p " << p.top_p << ", min_p " << p.min_p;
  if (p.repetition_penalty != 1) s << ", repeat_penalty " << p.repetition_penalty;
  if (p.presence_penalty != 0) s << ", presence_penalty " << p.presence_penalty;
  if (p.frequency_penalty != 0) s << ", frequency_penalty " << p.frequency_penalty;
  if (p.xtc_probability > 0) s << ", xtc " << p.xtc_probability << "@" << p.xtc_threshold;
  if (!p.logit_bias.empty()) s << ", " << p.logit_bias.size() << " logit biases";
  if (p.seed) s << ", seed " << *p.seed;
  return s.str();
}

}  // namespace g4::cli
