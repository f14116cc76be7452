// Sampler: turns one decode step's logits into a token id, the way mlx-lm
// (and the reference system built on it) does. Chain, in order:
//
//   1. logit_bias                       logits[id] += bias
//   2. repetition penalty               last N tokens: l > 0 ? l / r : l * r
//   3. presence penalty                 last N tokens: l -= presence
//   4. frequency penalty                last N tokens: l -= frequency * count
//      -- logprobs are reported here: full-vocabulary log-softmax (T = 1) --
//   5. temperature 0: argmax (ties -> lowest id); stop.
//   6. top-p, min-p, XTC, top-k         filters on those T = 1 probabilities
//   7. categorical over the kept tokens with p ~ exp(logit / temperature)
//
// Filters act on the temperature-1 distribution, as in mlx-lm: temperature
// only reshapes the draw among the kept tokens. Top-p keeps the smallest
// prefix of the tokens sorted by probability (ties: lower id first) whose
// mass reaches top_p; min-p keeps p >= min_p * p_max; top-k keeps the k
// first tokens of that order still kept. Top-p, min-p and top-k are
// therefore prefixes of one order and commute; XTC (applied with
// probability xtc_probability) removes every token whose renormalized
// probability exceeds xtc_threshold except the least likely of them, sparing
// xtc_exempt_tokens. Details and the reasons: docs/sampling.md.
//
// Penalty windows cover the last N of the `context_tokens` the caller passes
// (mlx-lm passes prompt + generated; N = 0 means all of them).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"

namespace g4 {

struct GenerationConfig;  // io/config.h

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  float xtc_probability = 0.0f;  // 0 = off
  float xtc_threshold = 0.1f;
  std::vector<int> xtc_exempt_tokens;  // e.g. EOS ids and "\n" (107)
  float repetition_penalty = 1.0f;     // 1 = off
  int repetition_context_size = 20;
  float presence_penalty = 0.0f;  // 0 = off
  int presence_context_size = 20;
  float frequency_penalty = 0.0f;  // 0 = off
  int frequency_context_size = 20;
  std::map<int, float> logit_bias;
  std::optional<uint64_t> seed;  // unset: seeded from std::random_device
  int top_logprobs = 0;          // how many alternatives LogProbs::top lists
};

// InvalidArgument naming the field for values outside their range (negative
// temperature, top_p outside (0, 1], a logit_bias id outside the
// vocabulary, ...). A Sampler built from invalid params never crashes: it
// clamps or ignores them, but callers taking user input validate first.
Status ValidateSamplingParams(const SamplingParams& params, int vocab_size);

// What the user set explicitly; unset fields fall back to the model's
// generation_config.json.
struct SamplingOverrides {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
};
// Per field: the user's override, else generation_config.json's value, else
// what `params` already holds.
void ApplyGenerationDefaults(const GenerationConfig& generation, const SamplingOverrides& user,
                             SamplingParams& params);

struct TokenLogProb {
  int id = 0;
  float logprob = 0;
};
struct LogProbs {
  int token = 0;
  float logprob = 0;               // of the chosen token
  std::vector<TokenLogProb> top;   // top_logprobs best, descending (ties: lower id first)
};

// The distribution step 7 draws from: kept ids sorted by descending
// probability (ties: lower id first) and their probabilities, summing to 1.
struct Candidates {
  std::vector<int> ids;
  std::vector<double> probs;
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab_size);

  // Picks the next token from `logits` (vocab_size values). On return
  // `logits` holds the values after steps 1-4 (NaN read as -inf, +inf as the
  // largest float). `out`, when given, receives the logprobs. When no logit
  // is finite the result is token 0.
  int Sample(float* logits, std::span<const int> context_tokens, LogProbs* out = nullptr);

  // Steps 6-7's distribution for logits already through steps 1-4, with the
  // XTC coin given instead of drawn. For tests and diagnostics.
  Candidates Filtered(const float* logits, bool xtc_fires);

  const SamplingParams& params() const { return params_; }

 private:
  // Ids of the tokens step 6 keeps (in pool_, no particular order). `probs`
  // holds exp(logit - max) for every id and `inv_sum` normalizes it; both are
  // only read when top-p or XTC needs probabilities.
  const std::vector<int>& Keep(const float* logits, float max, const float* probs, double inv_sum, bool xtc_fires);
  // Reduces pool_ to the smallest prefix of the order whose mass reaches top_p.
  void CutTopP(const float* logits, float max, const float* probs, double inv_sum);
  double Uniform();

  SamplingParams params_;
  int vocab_size_;
  std::mt19937_64 rng_;
  std::vector<int> pool_;        // scratch: candidate ids
  std::vector<int> top_;         // scratch: logprobs alternatives
  std::vector<float> exps_;      // scratch: exp(logit - max), per id
  std::vector<float> weights_;   // scratch: exp((logit - max) / T), per id
  std::vector<uint16_t> bucket_; // scratch: top-p histogram bucket, per pool entry
};

// Steps 1-4 and the log-softmax, exposed for tests and batched callers.
void ApplyLogitBias(const std::map<int, float>& bias, float* logits, int vocab_size);
void ApplyPenalties(const SamplingParams& params, std::span<const int> context_tokens, float* logits,
                    int vocab_size);
// log(sum(exp(logits))), computed stably; -inf when no logit is finite.
double LogSumExp(const float* logits, int n);
// Index of the largest value, lowest index on ties (NaN never wins).
int Argmax(const float* values, int n);

}  // namespace g4
