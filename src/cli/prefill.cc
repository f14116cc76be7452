#include "cli/prefill.h"

#include <algorithm>
#include <chrono>

#include "cli/progress.h"

namespace g4::cli {

StatusOr<PrefillStats> Prefill(Generator& gen, const std::vector<int32_t>& prompt, int64_t piece, bool show) {
  PrefillStats st;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t target = static_cast<int64_t>(prompt.size()) - 1;
  const std::vector<int32_t>& cached = gen.cached_tokens();
  const bool prefix = cached.size() <= prompt.size() && std::equal(cached.begin(), cached.end(), prompt.begin());
  st.reused = prefix ? std::min<int64_t>(static_cast<int64_t>(cached.size()), target) : 0;
  if (st.reused >= target) return st;
  piece = std::max<int64_t>(piece, 1);
  const bool bar_wanted = show && target - st.reused >= 4 * piece;
  Progress bar("prefill", static_cast<uint64_t>(target), Progress::Unit::kTokens, bar_wanted);
  if (!bar_wanted) piece = target;
  GenerateOptions only_prompt;
  only_prompt.max_tokens = 0;
  // A cache that holds exactly the first k tokens is reused by the next
  // call only when that call extends it, so start one piece past it.
  for (int64_t k = std::min(target, st.reused + piece); ; k = std::min(target, k + piece)) {
    const std::vector<int32_t> part(prompt.begin(), prompt.begin() + k);
    G4_ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(part, only_prompt, {}));
    (void)r;
    bar.Update(static_cast<uint64_t>(k));
    if (k == target) break;
  }
  bar.Finish();
  st.ran = target - st.reused;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace g4::cli
