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
//
// Randomness is counter-based: the uniform draws of a call depend only on
// (seed, step), never on earlier calls, so a sequence samples the same
// tokens whatever batch it runs in, on any backend. With all arithmetic
// modulo 2^64:
//
//   SplitMix64(z):  z += 0x9E3779B97F4A7C15
//                   z  = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//                   z  = (z ^ (z >> 27)) * 0x94D049BB133111EB
//                   return z ^ (z >> 31)
//   bits(seed, step, draw) = SplitMix64(SplitMix64(SplitMix64(seed) ^ step) ^ draw)
//   uniform(seed, step, draw) = double(bits >> 11) * 2^-53        in [0, 1)
//
// Draw 0 (kDrawCategorical) is step 7's draw: with the kept tokens' weights
// exp((logit - max) / temperature) summed in double in ascending id order,
// target = uniform * total and the token is the first in ascending id
// order whose running sum exceeds target (the last kept one if rounding
// leaves none). Draw 1 (kDrawXtc) is the XTC coin: XTC fires when
// uniform < xtc_probability; it is only drawn for a non-greedy row. `step` is the number of tokens the
// sequence sampled before this one; the caller picks the seed (the engine
// draws one from std::random_device when the user sets none).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
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
  // Read by the engine, not by Sampler (which takes the seed per call):
  // unset, the engine draws one from std::random_device.
  std::optional<uint64_t> seed;
  int top_logprobs = 0;          // how many alternatives LogProbs::top lists
};

// InvalidArgument naming the field for values outside their range (negative
// temperature, top_p outside (0, 1], a logit_bias id outside the
// vocabulary, ...). A Sampler built from invalid params never crashes: it
// clamps or ignores them, but callers taking user input validate first.
Status ValidateSamplingParams(const SamplingParams& params, int vocab_size);

// The scalar parameters (temperature, filters, penalties and their windows)
// between SamplingParams and the plain-data row Ops::SampleRows reads; the
// index ranges, bias, exempt ids, seed and step are the caller's.
struct SampleRowParams;  // backend/ops.h
void CopyScalarParams(const SamplingParams& from, SampleRowParams* to);
void CopyScalarParams(const SampleRowParams& from, SamplingParams* to);

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

inline constexpr uint64_t kDrawCategorical = 0;
inline constexpr uint64_t kDrawXtc = 1;

constexpr uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t SampleBits(uint64_t seed, uint64_t step, uint64_t draw) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ step) ^ draw);
}
constexpr double SampleUniform(uint64_t seed, uint64_t step, uint64_t draw) {
  return static_cast<double>(SampleBits(seed, step, draw) >> 11) * 0x1.0p-53;
}

// Not thread-safe (scratch buffers); one Sampler per thread. Holds no
// random state: Sample is a function of its arguments.
class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab_size);

  // Picks the next token from `logits` (vocab_size values), its random
  // draws those of (seed, step) (see above). On return `logits` holds the
  // values after steps 1-4 (NaN read as -inf, +inf as the largest float).
  // `out`, when given, receives the logprobs. When no logit is finite the
  // result is token 0.
  int Sample(float* logits, std::span<const int> context_tokens, uint64_t seed, uint64_t step,
             LogProbs* out = nullptr);

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

  SamplingParams params_;
  int vocab_size_;
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
