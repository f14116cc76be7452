#include "backend/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

// Vector exp and argmax from the CPU backend's header-only SIMD layer (no
// link dependency on it): the reference must be fast enough to serve as the
// CPU backend's SampleRows over a 262k vocabulary.
#include "backend/cpu/simd.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops.h"
#include "io/config.h"

namespace g4 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The order every filter is a prefix of: higher logit first, lower id on ties.
struct Better {
  const float* logits;
  bool operator()(int a, int b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

// out[i] = exp((in[i] - shift) * scale); returns the sum. Vectorized: one
// pass over the vocabulary costs about as much as reading it. -inf inputs
// give a negligible positive value (about 1e-38), never chosen: callers
// only sample ids with finite logits.
double ExpShifted(const float* in, int n, float shift, float scale, float* out) {
  using namespace cpu;
  const VF vs = VSet1(shift), vk = VSet1(scale);
  double sum = 0;
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const VF e = VExp(VMul(VSub(VLoad(in + i), vs), vk));
    VStore(out + i, e);
    sum += VReduceAdd(e);
  }
  if (i < n) {
    const int rest = n - i;
    const VF e = VExp(VMul(VSub(VLoadN(in + i, rest), vs), vk));
    VStoreN(out + i, e, rest);
    for (int j = i; j < n; ++j) sum += out[j];
  }
  return sum;
}

std::span<const int> Window(std::span<const int> tokens, int size) {
  if (size > 0 && static_cast<size_t>(size) < tokens.size()) return tokens.last(static_cast<size_t>(size));
  return tokens;
}

// Sorted in-range ids of `tokens` (duplicates kept).
std::vector<int> SortedIds(std::span<const int> tokens, int vocab_size) {
  std::vector<int> ids;
  ids.reserve(tokens.size());
  for (int t : tokens) {
    if (t >= 0 && t < vocab_size) ids.push_back(t);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::string Num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

Status Bad(const std::string& field, const std::string& rule, double got) {
  return InvalidArgument("[sampler] " + field + " must be " + rule + " (got " + Num(got) + ")");
}

// The k best ids (Better order, sorted) among those with logit >= floor;
// -inf logits only when `finite_only` is false. One pass: after the heap
// fills, almost every id costs a single comparison.
void TopKIds(const float* logits, int n, size_t k, double floor, bool finite_only, std::vector<int>* out) {
  const Better better{logits};
  out->clear();
  if (k == 0) return;
  int i = 0;
  for (; i < n && out->size() < k; ++i) {
    const float v = logits[i];
    if ((finite_only && !(v > kNegInf)) || static_cast<double>(v) < floor) continue;
    out->push_back(i);
    std::push_heap(out->begin(), out->end(), better);  // top: the worst kept
  }
  if (out->size() == k) {
    float worst = logits[out->front()];
    for (; i < n; ++i) {
      // Scanning upward, an equal logit has a higher id: never better.
      if (logits[i] > worst) {
        std::pop_heap(out->begin(), out->end(), better);
        out->back() = i;
        std::push_heap(out->begin(), out->end(), better);
        worst = logits[out->front()];
      }
    }
  }
  std::sort(out->begin(), out->end(), better);
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p, int vocab_size) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) return Bad("temperature", ">= 0", p.temperature);
  if (p.top_k < 0) return Bad("top_k", ">= 0", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return Bad("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return Bad("min_p", "in [0, 1]", p.min_p);
  if (!(p.xtc_probability >= 0 && p.xtc_probability <= 1)) {
    return Bad("xtc_probability", "in [0, 1]", p.xtc_probability);
  }
  if (!(p.xtc_threshold >= 0 && p.xtc_threshold <= 0.5f)) return Bad("xtc_threshold", "in [0, 0.5]", p.xtc_threshold);
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty)) {
    return Bad("repetition_penalty", "> 0", p.repetition_penalty);
  }
  if (!std::isfinite(p.presence_penalty)) return Bad("presence_penalty", "finite", p.presence_penalty);
  if (!std::isfinite(p.frequency_penalty)) return Bad("frequency_penalty", "finite", p.frequency_penalty);
  if (p.repetition_context_size < 0) return Bad("repetition_context_size", ">= 0", p.repetition_context_size);
  if (p.presence_context_size < 0) return Bad("presence_context_size", ">= 0", p.presence_context_size);
  if (p.frequency_context_size < 0) return Bad("frequency_context_size", ">= 0", p.frequency_context_size);
  if (p.top_logprobs < 0) return Bad("top_logprobs", ">= 0", p.top_logprobs);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("[sampler] logit_bias: token id " + std::to_string(id) + " outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
    // -inf is allowed: it bans a token.
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return InvalidArgument("[sampler] logit_bias: token id " + std::to_string(id) + " has bias " + Num(bias));
    }
  }
  for (int id : p.xtc_exempt_tokens) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("[sampler] xtc_exempt_tokens: token id " + std::to_string(id) + " outside the vocabulary");
    }
  }
  return Status::Ok();
}

void ApplyGenerationDefaults(const GenerationConfig& gen, const SamplingOverrides& user, SamplingParams& params) {
  auto pick = [](auto& field, const auto& override_value, const auto& config_value) {
    using T = std::remove_reference_t<decltype(field)>;
    if (override_value) {
      field = static_cast<T>(*override_value);
    } else if (config_value) {
      field = static_cast<T>(*config_value);
    }
  };
  pick(params.temperature, user.temperature, gen.temperature);
  pick(params.top_p, user.top_p, gen.top_p);
  pick(params.top_k, user.top_k, gen.top_k);
  pick(params.min_p, user.min_p, gen.min_p);
  pick(params.repetition_penalty, user.repetition_penalty, gen.repetition_penalty);
  // do_sample: false is transformers' spelling of greedy decoding; it wins
  // over the config's temperature but not over the user's.
  if (!user.temperature && gen.do_sample && !*gen.do_sample) params.temperature = 0.0f;
}

void ApplyLogitBias(const std::map<int, float>& bias, float* logits, int vocab_size) {
  for (const auto& [id, b] : bias) {
    if (id >= 0 && id < vocab_size) logits[id] += b;
  }
}

void ApplyPenalties(const SamplingParams& p, std::span<const int> context, float* logits, int vocab_size) {
  if (p.repetition_penalty != 1.0f && p.repetition_penalty > 0) {
    std::vector<int> ids = SortedIds(Window(context, p.repetition_context_size), vocab_size);
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int id : ids) {
      float& l = logits[id];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f) {
    std::vector<int> ids = SortedIds(Window(context, p.presence_context_size), vocab_size);
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int id : ids) logits[id] -= p.presence_penalty;
  }
  if (p.frequency_penalty != 0.0f) {
    std::vector<int> ids = SortedIds(Window(context, p.frequency_context_size), vocab_size);
    for (size_t i = 0; i < ids.size();) {
      size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      logits[ids[i]] -= p.frequency_penalty * static_cast<float>(j - i);
      i = j;
    }
  }
}

int Argmax(const float* v, int n) {
  // Vectorized max (AVX max keeps its second operand when the first is NaN,
  // so NaN never wins), then the first index holding it.
  using namespace cpu;
  VF acc = VSet1(kNegInf);
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = VMax(VLoad(v + i), acc);
  float max = VReduceMax(acc);
  for (; i < n; ++i) {
    if (v[i] > max) max = v[i];
  }
  if (!(max > kNegInf)) return 0;
  for (int j = 0; j < n; ++j) {
    if (v[j] == max) return j;
  }
  return 0;
}

double LogSumExp(const float* logits, int n) {
  const float max = logits[Argmax(logits, n)];
  if (!(max > kNegInf)) return -std::numeric_limits<double>::infinity();
  if (max == std::numeric_limits<float>::infinity()) return max;
  std::vector<float> scratch(static_cast<size_t>(n));
  return max + std::log(ExpShifted(logits, n, max, 1.0f, scratch.data()));
}

Sampler::Sampler(const SamplingParams& params, int vocab_size) : params_(params), vocab_size_(vocab_size) {
  // Out-of-range values degrade to the nearest meaningful setting; callers
  // that take user input reject them first (ValidateSamplingParams).
  if (!(params_.temperature > 0)) params_.temperature = 0;
  if (params_.top_k < 0) params_.top_k = 0;
  if (!(params_.top_p <= 1)) params_.top_p = 1;
  if (!(params_.min_p >= 0)) params_.min_p = 0;
  if (params_.min_p > 1) params_.min_p = 1;
  if (!(params_.xtc_probability >= 0)) params_.xtc_probability = 0;
  if (!(params_.repetition_penalty > 0)) params_.repetition_penalty = 1;
  params_.top_logprobs = std::clamp(params_.top_logprobs, 0, vocab_size_);
}

void Sampler::CutTopP(const float* logits, float max, const float* probs, double inv_sum) {
  // Histogram selection instead of a sort: bucket b holds logits in the b-th
  // slice below the max (monotone in the logit, so ties share a bucket).
  // Whole buckets are kept until the one where the mass crosses top_p; only
  // that bucket is sorted.
  constexpr int kBuckets = 4096;
  // In double: a float range can overflow, and its reciprocal too.
  float lo = max;
  for (int id : pool_) lo = std::min(lo, logits[id]);
  const double range = static_cast<double>(max) - lo;
  const double scale = range > 0 ? kBuckets / range : 0.0;
  std::vector<double> mass(kBuckets, 0.0);
  bucket_.resize(pool_.size());
  for (size_t i = 0; i < pool_.size(); ++i) {
    const double offset = (static_cast<double>(max) - logits[pool_[i]]) * scale;
    const int b = std::min(kBuckets - 1, static_cast<int>(offset));
    bucket_[i] = static_cast<uint16_t>(b);
    mass[b] += probs[pool_[i]] * inv_sum;
  }
  double cum = 0;
  int cross = 0;
  for (; cross < kBuckets; ++cross) {
    if (cum + mass[cross] >= params_.top_p) break;
    cum += mass[cross];
  }
  if (cross == kBuckets) return;  // rounding kept the mass short of top_p: keep everything
  std::vector<int> edge;
  size_t out = 0;
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (bucket_[i] < cross) pool_[out++] = pool_[i];
    if (bucket_[i] == cross) edge.push_back(pool_[i]);
  }
  pool_.resize(out);
  std::sort(edge.begin(), edge.end(), Better{logits});
  for (int id : edge) {
    pool_.push_back(id);
    cum += probs[id] * inv_sum;
    if (cum >= params_.top_p) break;
  }
}

const std::vector<int>& Sampler::Keep(const float* logits, float max, const float* probs, double inv_sum,
                                      bool xtc_fires) {
  const int n = vocab_size_;
  const bool top_p_on = params_.top_p < 1.0f;
  const bool top_k_on = params_.top_k > 0 && params_.top_k < n;
  const bool xtc_on = xtc_fires && params_.xtc_probability > 0;
  const Better better{logits};

  // Min-p is a threshold on the logit: p >= min_p * p_max  <=>  logit >=
  // max + log(min_p). Like every filter here it keeps a prefix of the
  // `Better` order; the pool is the finite logits that pass it.
  const double min_p_cut = params_.min_p > 0 ? std::log(static_cast<double>(params_.min_p)) : -HUGE_VAL;
  const double floor = static_cast<double>(max) + min_p_cut;

  if (top_k_on && !xtc_on) {
    // Prefixes commute: take the k best, then walk top-p along them (the
    // running mass of a prefix is the same in the pool as in the vocabulary).
    TopKIds(logits, n, static_cast<size_t>(params_.top_k), floor, /*finite_only=*/true, &pool_);
    if (top_p_on) {
      double cum = 0;
      size_t count = 0;
      while (count < pool_.size()) {
        cum += probs[pool_[count++]] * inv_sum;
        if (cum >= params_.top_p) break;
      }
      pool_.resize(count);
    }
    return pool_;
  }

  pool_.clear();
  for (int i = 0; i < n; ++i) {
    if (logits[i] > kNegInf && static_cast<double>(logits[i]) >= floor) pool_.push_back(i);
  }
  if (top_p_on) CutTopP(logits, max, probs, inv_sum);

  if (xtc_on) {
    // Probabilities renormalized over the survivors; remove every token above
    // the threshold except the least likely of them (and exempt tokens).
    double mass = 0;
    for (int id : pool_) mass += probs[id] * inv_sum;
    auto q = [&](int id) { return probs[id] * inv_sum / mass; };
    double least = HUGE_VAL;
    int above = 0;
    for (int id : pool_) {
      if (q(id) > params_.xtc_threshold) {
        ++above;
        least = std::min(least, q(id));
      }
    }
    if (above >= 2) {
      const std::vector<int>& exempt = params_.xtc_exempt_tokens;
      std::erase_if(pool_, [&](int id) {
        return q(id) > least && std::find(exempt.begin(), exempt.end(), id) == exempt.end();
      });
    }
  }

  if (top_k_on && pool_.size() > static_cast<size_t>(params_.top_k)) {
    std::nth_element(pool_.begin(), pool_.begin() + params_.top_k, pool_.end(), better);
    pool_.resize(static_cast<size_t>(params_.top_k));
  }
  return pool_;
}

Candidates Sampler::Filtered(const float* logits, bool xtc_fires) {
  Candidates c;
  const int n = vocab_size_;
  const int best = Argmax(logits, n);
  const float max = logits[best];
  if (params_.temperature <= 0 || !(max > kNegInf) || !std::isfinite(1.0f / params_.temperature)) {
    c.ids = {best};
    c.probs = {1.0};
    return c;
  }
  exps_.resize(static_cast<size_t>(n));
  const double sum = ExpShifted(logits, n, max, 1.0f, exps_.data());
  c.ids = Keep(logits, max, exps_.data(), 1.0 / sum, xtc_fires);
  std::sort(c.ids.begin(), c.ids.end(), Better{logits});
  double total = 0;
  for (int id : c.ids) {
    c.probs.push_back(std::exp((static_cast<double>(logits[id]) - max) / params_.temperature));
    total += c.probs.back();
  }
  for (double& p : c.probs) p /= total;
  return c;
}

int Sampler::Sample(float* logits, std::span<const int> context_tokens, uint64_t seed, uint64_t step,
                    LogProbs* out) {
  const int n = vocab_size_;
  ApplyLogitBias(params_.logit_bias, logits, n);
  ApplyPenalties(params_, context_tokens, logits, n);
  int banned = 0;  // -inf logits
  for (int i = 0; i < n; ++i) {
    const float l = logits[i];
    logits[i] = std::isnan(l) ? kNegInf : l == std::numeric_limits<float>::infinity() ? FLT_MAX : l;
    banned += logits[i] == kNegInf;
  }
  const int best = Argmax(logits, n);
  const float max = logits[best];
  const bool finite = max > kNegInf;
  // A temperature so small that 1 / T overflows is greedy in all but name.
  const bool greedy = params_.temperature <= 0 || !finite || !std::isfinite(1.0f / params_.temperature);
  const bool xtc_fires =
      !greedy && params_.xtc_probability > 0 && SampleUniform(seed, step, kDrawXtc) < params_.xtc_probability;
  const bool filtered =
      params_.top_p < 1.0f || params_.min_p > 0 || (params_.top_k > 0 && params_.top_k < n) || xtc_fires;

  // exp(logit - max) for every id, when logprobs or a filter need it.
  double inv_sum = 0;
  const bool need_probs = finite && (out != nullptr || (!greedy && (params_.top_p < 1.0f || xtc_fires)));
  if (need_probs) {
    exps_.resize(static_cast<size_t>(n));
    inv_sum = 1.0 / ExpShifted(logits, n, max, 1.0f, exps_.data());
  }

  int token = best;
  if (!greedy) {
    // Draw from weights exp((logit - max) / T) <= 1 over the kept ids, or
    // over the whole vocabulary when no filter is on.
    const float inv_t = 1.0f / params_.temperature;
    const std::vector<int>* kept = nullptr;
    if (filtered) {
      Keep(logits, max, exps_.data(), inv_sum, xtc_fires);
      // The walk below goes in ascending id (sampler.h), whatever order the
      // filters left the pool in (top-k's selection scrambles it).
      if (!std::is_sorted(pool_.begin(), pool_.end())) std::sort(pool_.begin(), pool_.end());
      kept = &pool_;
    }
    const float* w = nullptr;
    if (need_probs && inv_t == 1.0f) {
      w = exps_.data();
    } else if (kept == nullptr || kept->size() > 4096) {
      weights_.resize(static_cast<size_t>(n));
      ExpShifted(logits, n, max, inv_t, weights_.data());
      w = weights_.data();
    } else {
      weights_.resize(static_cast<size_t>(n));
      for (int id : *kept) weights_[id] = std::exp((logits[id] - max) * inv_t);
      w = weights_.data();
    }
    if (kept != nullptr) {
      double total = 0;
      for (int id : *kept) total += w[id];
      const double target = SampleUniform(seed, step, kDrawCategorical) * total;
      double acc = 0;
      token = kept->back();
      for (int id : *kept) {
        acc += w[id];
        if (target < acc) {
          token = id;
          break;
        }
      }
    } else {
      // Banned ids must weigh exactly 0 (the vector exp gives them ~1e-38).
      double total = 0;
      for (int i = 0; i < n; ++i) total += banned > 0 && logits[i] == kNegInf ? 0.0 : w[i];
      const double target = SampleUniform(seed, step, kDrawCategorical) * total;
      double acc = 0;
      token = best;
      for (int i = 0; i < n; ++i) {
        if (banned > 0 && logits[i] == kNegInf) continue;
        acc += w[i];
        if (target < acc) {
          token = i;
          break;
        }
      }
    }
  }

  if (out != nullptr) {
    const double lse = finite ? max - std::log(inv_sum) : -HUGE_VAL;
    out->token = token;
    out->logprob = static_cast<float>(logits[token] - lse);
    out->top.clear();
    const int k = params_.top_logprobs;
    if (k > 0) {
      TopKIds(logits, n, static_cast<size_t>(k), -HUGE_VAL, /*finite_only=*/false, &top_);
      for (int id : top_) out->top.push_back({id, static_cast<float>(logits[id] - lse)});
    }
  }
  return token;
}

namespace {

// f(s.field, r.field) for each scalar parameter, the pairs in one place so
// that the two copies below cannot drift apart.
template <class S, class R, class F>
void ForEachScalarPair(S& s, R& r, F f) {
  f(s.temperature, r.temperature);
  f(s.top_p, r.top_p);
  f(s.min_p, r.min_p);
  f(s.xtc_probability, r.xtc_probability);
  f(s.xtc_threshold, r.xtc_threshold);
  f(s.repetition_penalty, r.repetition_penalty);
  f(s.presence_penalty, r.presence_penalty);
  f(s.frequency_penalty, r.frequency_penalty);
  f(s.top_k, r.top_k);
  f(s.repetition_context_size, r.repetition_context);
  f(s.presence_context_size, r.presence_context);
  f(s.frequency_context_size, r.frequency_context);
}

}  // namespace

void CopyScalarParams(const SamplingParams& from, SampleRowParams* to) {
  ForEachScalarPair(from, *to, [](const auto& s, auto& r) { r = s; });
}

void CopyScalarParams(const SampleRowParams& from, SamplingParams* to) {
  ForEachScalarPair(*to, from, [](auto& s, const auto& r) { s = r; });
}

}  // namespace g4
