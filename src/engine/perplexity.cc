// Perplexity (llama.cpp's method): see perplexity.h.
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace g4 {
namespace {

double LogSumExp(const float* row, int64_t n) {
  const double m = *std::max_element(row, row + n);
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += std::exp(row[j] - m);
  return m + std::log(s);
}

// Standard error of a mean from the sums of x and x^2 over n samples.
double StdError(double sum, double sum2, int64_t n) {
  if (n < 2) return 0;
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  return var > 0 ? std::sqrt(var / (n - 1)) : 0;
}

// Runs ids[0..n) through `kv`, in chunks of at most `chunk` tokens that never
// cross a pending precision change of a cache. With `logits`, writes every
// row ([n, V]); without, computes no logits.
Status RunTokens(Gemma4Model& model, SequenceKv& kv, const int32_t* ids, int64_t n, int64_t chunk, float* logits) {
  const int64_t V = model.vocab_size();
  for (int64_t done = 0; done < n;) {
    int64_t len = std::min(chunk, n - done);
    int64_t room = kv.max_append_tokens();
    if (room <= 0) {
      G4_RETURN_IF_ERROR(kv.Maintain());
      room = kv.max_append_tokens();
    }
    if (room > 0) len = std::min(len, room);
    G4_RETURN_IF_ERROR(model.Forward(ids + done, len, kv, logits ? logits + done * V : nullptr, logits != nullptr));
    done += len;
  }
  return Status::Ok();
}

}  // namespace

double PerplexityStats::Ppl() const { return std::exp(MeanNll()); }
double PerplexityStats::PplError() const { return Ppl() * StdError(nll, nll2, count); }
double PerplexityStats::RefPpl() const { return count ? std::exp(ref_nll / count) : 0; }
double PerplexityStats::RefPplError() const { return RefPpl() * StdError(ref_nll, ref_nll2, count); }
double PerplexityStats::KlError() const { return StdError(kl, kl2, count); }

int64_t PerplexityWindows(int64_t num_tokens, const PerplexityOptions& options) {
  if (options.ctx <= 0) return 0;
  int64_t n = num_tokens / options.ctx;
  if (options.max_windows > 0) n = std::min(n, options.max_windows);
  return n;
}

StatusOr<PerplexityStats> ComputePerplexity(Gemma4Model& model, std::span<const int32_t> tokens,
                                            const KvScheme& scheme, const KvScheme* reference,
                                            const PerplexityOptions& options,
                                            const std::function<void(int64_t, const PerplexityStats&)>& on_window) {
  const int64_t ctx = options.ctx;
  if (ctx < 4) return InvalidArgument("[perplexity] --ctx must be at least 4 (got " + std::to_string(ctx) + ")");
  if (options.chunk <= 0) return InvalidArgument("[perplexity] --chunk must be positive");
  const int64_t windows = PerplexityWindows(static_cast<int64_t>(tokens.size()), options);
  if (windows == 0)
    return InvalidArgument("[perplexity] the text has " + std::to_string(tokens.size()) +
                           " tokens, fewer than one window of " + std::to_string(ctx) + "; use a smaller --ctx");
  const int64_t V = model.vocab_size();
  const int64_t first = ctx / 2;
  const int64_t chunk = std::min(options.chunk, ctx - first);

  PerplexityStats st;
  st.has_reference = reference != nullptr;
  std::vector<int32_t> win(ctx);
  std::vector<float> rows(chunk * V), ref_rows(reference ? chunk * V : 0);
  for (int64_t w = 0; w < windows; ++w) {
    std::copy(tokens.begin() + w * ctx, tokens.begin() + (w + 1) * ctx, win.begin());
    if (options.bos_id >= 0) win[0] = options.bos_id;
    G4_ASSIGN_OR_RETURN(std::unique_ptr<SequenceKv> kv, SequenceKv::Make(model.config(), scheme));
    std::unique_ptr<SequenceKv> ref_kv;
    if (reference) {
      G4_ASSIGN_OR_RETURN(ref_kv, SequenceKv::Make(model.config(), *reference));
    }
    // The first half is context only: no logits.
    G4_RETURN_IF_ERROR(RunTokens(model, *kv, win.data(), first, options.chunk, nullptr));
    if (ref_kv) G4_RETURN_IF_ERROR(RunTokens(model, *ref_kv, win.data(), first, options.chunk, nullptr));
    for (int64_t b = first; b < ctx; b += chunk) {
      const int64_t len = std::min(chunk, ctx - b);
      G4_RETURN_IF_ERROR(RunTokens(model, *kv, win.data() + b, len, chunk, rows.data()));
      if (ref_kv) G4_RETURN_IF_ERROR(RunTokens(model, *ref_kv, win.data() + b, len, chunk, ref_rows.data()));
      for (int64_t i = 0; i < len && b + i + 1 < ctx; ++i) {
        const int32_t target = win[b + i + 1];
        const float* q = &rows[i * V];
        const double q_lse = LogSumExp(q, V);
        const double nll = q_lse - q[target];
        st.nll += nll;
        st.nll2 += nll * nll;
        ++st.count;
        if (!ref_kv) continue;
        const float* p = &ref_rows[i * V];
        const double p_lse = LogSumExp(p, V);
        const double ref_nll = p_lse - p[target];
        st.ref_nll += ref_nll;
        st.ref_nll2 += ref_nll * ref_nll;
        double kl = 0;
        for (int64_t j = 0; j < V; ++j) {
          const double lp = p[j] - p_lse;
          kl += std::exp(lp) * (lp - (q[j] - q_lse));
        }
        kl = std::max(kl, 0.0);  // rounding can leave a tiny negative for identical rows
        st.kl += kl;
        st.kl2 += kl * kl;
        st.top1_agree += (std::max_element(p, p + V) - p) == (std::max_element(q, q + V) - q);
      }
    }
    ++st.windows;
    if (on_window) on_window(w, st);
  }
  return st;
}

}  // namespace g4
