// Perplexity (llama.cpp's method): see perplexity.h.
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/logit_stats.h"

namespace g4 {
namespace {

// Standard error of a mean from the sums of x and x^2 over n samples.
double StdError(double sum, double sum2, int64_t n) {
  if (n < 2) return 0;
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  return var > 0 ? std::sqrt(var / (n - 1)) : 0;
}

// One window on one engine: the scored rows' NLLs (and, when `keep_rows`,
// the rows themselves for the KL against the reference).
class WindowSink final : public SequenceSink {
 public:
  WindowSink(std::vector<int32_t> win, int64_t first, bool keep_rows)
      : win_(std::move(win)), first_(first), keep_rows_(keep_rows) {
    const int64_t n = static_cast<int64_t>(win_.size()) - 1 - first_;
    nll_.assign(n, 0);
    if (keep_rows_) rows_.resize(n);
  }
  void OnLogits(int64_t index, std::span<const float> logits) override {
    if (index < first_ || index + 1 >= static_cast<int64_t>(win_.size())) return;
    const int64_t i = index - first_;
    nll_[i] = LogSumExpD(logits) - logits[win_[index + 1]];
    if (keep_rows_) rows_[i].assign(logits.begin(), logits.end());
  }
  void OnFinish(FinishReason reason, KvSeq, const Status& status) override {
    done_ = true;
    status_ = status;
  }
  bool done() const { return done_; }
  const Status& status() const { return status_; }
  const std::vector<double>& nll() const { return nll_; }
  const std::vector<std::vector<float>>& rows() const { return rows_; }

 private:
  std::vector<int32_t> win_;
  int64_t first_;
  bool keep_rows_;
  std::vector<double> nll_;
  std::vector<std::vector<float>> rows_;
  bool done_ = false;
  Status status_;
};

Status RunAll(Engine& engine, std::vector<std::unique_ptr<WindowSink>>& sinks,
              const std::vector<std::vector<int32_t>>& windows, int64_t first) {
  Scheduler& sched = engine.scheduler();
  for (size_t i = 0; i < sinks.size(); ++i) {
    SequenceRequest req;
    req.prompt = windows[i];
    req.logits_from = first;
    req.sink = sinks[i].get();
    G4_ASSIGN_OR_RETURN(RequestId id, sched.Submit(std::move(req)));
    (void)id;
  }
  G4_RETURN_IF_ERROR(sched.RunUntilIdle());
  for (const auto& s : sinks) G4_RETURN_IF_ERROR(s->status());
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

StatusOr<PerplexityStats> ComputePerplexity(Engine& engine, Engine* reference, std::span<const int32_t> tokens,
                                            const PerplexityOptions& options,
                                            const std::function<void(int64_t, const PerplexityStats&)>& on_window) {
  const int64_t ctx = options.ctx;
  if (ctx < 4) return InvalidArgument("[perplexity] --ctx must be at least 4 (got " + std::to_string(ctx) + ")");
  const int64_t windows = PerplexityWindows(static_cast<int64_t>(tokens.size()), options);
  if (windows == 0)
    return InvalidArgument("[perplexity] the text has " + std::to_string(tokens.size()) +
                           " tokens, fewer than one window of " + std::to_string(ctx) + "; use a smaller --ctx");
  const int vocab = engine.model().vocab_size();
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return InvalidArgument("[perplexity] token " + std::to_string(i) + " (id " + std::to_string(tokens[i]) +
                             ") is outside the vocabulary (size " + std::to_string(vocab) + ")");
  const int64_t first = ctx / 2;
  // Windows in flight at once: the KL needs both engines' rows of a window.
  const int64_t batch = reference ? 1 : std::max(1, engine.options().max_seqs);

  PerplexityStats st;
  st.has_reference = reference != nullptr;
  for (int64_t w0 = 0; w0 < windows; w0 += batch) {
    const int64_t n = std::min(batch, windows - w0);
    std::vector<std::vector<int32_t>> wins;
    std::vector<std::unique_ptr<WindowSink>> sinks, ref_sinks;
    for (int64_t w = w0; w < w0 + n; ++w) {
      std::vector<int32_t> win(tokens.begin() + w * ctx, tokens.begin() + (w + 1) * ctx);
      if (options.bos_id >= 0) win[0] = options.bos_id;
      sinks.push_back(std::make_unique<WindowSink>(win, first, reference != nullptr));
      if (reference) ref_sinks.push_back(std::make_unique<WindowSink>(win, first, true));
      wins.push_back(std::move(win));
    }
    G4_RETURN_IF_ERROR(RunAll(engine, sinks, wins, first));
    if (reference) G4_RETURN_IF_ERROR(RunAll(*reference, ref_sinks, wins, first));
    for (int64_t i = 0; i < n; ++i) {
      const WindowSink& q = *sinks[i];
      for (size_t r = 0; r < q.nll().size(); ++r) {
        const double nll = q.nll()[r];
        st.nll += nll;
        st.nll2 += nll * nll;
        ++st.count;
        if (!reference) continue;
        const WindowSink& p = *ref_sinks[i];
        const double ref_nll = p.nll()[r];
        st.ref_nll += ref_nll;
        st.ref_nll2 += ref_nll * ref_nll;
        const std::vector<float>& prow = p.rows()[r];
        const std::vector<float>& qrow = q.rows()[r];
        const double kl = KlDivergence(prow, qrow);
        st.kl += kl;
        st.kl2 += kl * kl;
        st.top1_agree += SameTop1(prow, qrow);
      }
      ++st.windows;
      if (on_window) on_window(w0 + i, st);
    }
  }
  return st;
}

}  // namespace g4
