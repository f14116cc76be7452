// Prompt prefill ahead of generation, for `g4 generate` and `g4 chat`: runs
// all of a prompt but its last token into a Generator's cache, in pieces
// with a progress bar when the prompt is long and stderr is a terminal.
// The Generate call that follows then runs the last token and samples;
// its results equal a single Generate over the whole prompt (the KV does
// not depend on how a prompt is cut into steps: docs/architecture.md).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "engine/generator.h"

namespace g4::cli {

struct PrefillStats {
  int64_t reused = 0;  // prompt tokens the cache already held
  int64_t ran = 0;     // tokens run here
  double seconds = 0;
};

// `piece`: tokens per Generate call while showing progress (a few
// scheduler steps); `show`: a progress bar is wanted (not -q). The bar
// appears for prompts of at least 4 pieces.
StatusOr<PrefillStats> Prefill(Generator& gen, const std::vector<int32_t>& prompt, int64_t piece, bool show);

}  // namespace g4::cli
