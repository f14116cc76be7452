// Perplexity over a token sequence, computed the way llama.cpp's perplexity
// tool does, so numbers are comparable: the sequence (BOS + the tokenized
// file) is cut into consecutive windows of `ctx` tokens (a partial last
// window is dropped); each window runs from an empty cache with its first
// token replaced by BOS; only the second half of each window is scored
// (positions ctx/2 .. ctx-2 predicting the next token), so every scored token
// has at least ctx/2 tokens of context. PPL = exp(mean NLL), and its
// uncertainty is PPL x the standard error of the mean NLL.
//
// With a reference engine (normally plain KV), every window also runs there,
// and the KL divergence KL(reference || scheme) of the next-token
// distributions and the top-1 agreement are averaged over the same scored
// positions: the quality cost of a KV-cache mode.
//
// Windows are independent sequences: they run through the engine's
// scheduler together (up to its sequence limit at once; one at a time with
// a reference, which holds both windows' logits), and sums are accumulated
// in window order, so the result does not depend on the batching.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/status.h"
#include "engine/engine.h"

namespace g4 {

struct PerplexityOptions {
  int64_t ctx = 512;        // window length, >= 4
  int64_t max_windows = 0;  // 0 = every whole window
  int32_t bos_id = -1;      // replaces each window's first token; -1 keeps it
};

// Sums over scored tokens; the accessors turn them into the reported values.
struct PerplexityStats {
  int64_t windows = 0;
  int64_t count = 0;  // scored tokens
  double nll = 0, nll2 = 0;
  // Against the reference scheme (when one was given).
  bool has_reference = false;
  double ref_nll = 0, ref_nll2 = 0;
  double kl = 0, kl2 = 0;
  int64_t top1_agree = 0;

  double MeanNll() const { return count ? nll / count : 0; }
  double Ppl() const;
  double PplError() const;  // PPL x standard error of the mean NLL
  double RefPpl() const;
  double RefPplError() const;
  double MeanKl() const { return count ? kl / count : 0; }
  double KlError() const;  // standard error of the mean KL
  double Top1Agreement() const { return count ? static_cast<double>(top1_agree) / count : 0; }
};

// Windows the sequence allows (llama.cpp: tokens / ctx, rounded down).
int64_t PerplexityWindows(int64_t num_tokens, const PerplexityOptions& options);

// Runs on `engine` (its KV scheme is the one measured) and, when given, on
// `reference` too; both engines must be idle and are the caller's for the
// duration. `on_window(i, stats_so_far)` runs after each window, in order.
// The engines' max_outputs bounds the logits rows computed per step.
StatusOr<PerplexityStats> ComputePerplexity(Engine& engine, Engine* reference, std::span<const int32_t> tokens,
                                            const PerplexityOptions& options,
                                            const std::function<void(int64_t, const PerplexityStats&)>& on_window = {});

}  // namespace g4
