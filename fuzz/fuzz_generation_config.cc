// libFuzzer target: ParseGenerationConfig must turn any byte string into a
// Status or a config, never crash or throw; every error names the module,
// and every accepted value is within the ranges the sampler relies on.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = g4::ParseGenerationConfig(text);
  if (!g.ok()) {
    if (g.status().message().rfind("[generation_config] ", 0) != 0) __builtin_trap();
    return 0;
  }
  if (!g->present) __builtin_trap();
  if (g->temperature && !(std::isfinite(*g->temperature) && *g->temperature >= 0 && *g->temperature <= 100))
    __builtin_trap();
  if (g->top_p && !(*g->top_p >= 0 && *g->top_p <= 1)) __builtin_trap();
  if (g->min_p && !(*g->min_p >= 0 && *g->min_p <= 1)) __builtin_trap();
  if (g->top_k && *g->top_k < 0) __builtin_trap();
  if (g->repetition_penalty && !(*g->repetition_penalty > 0 && *g->repetition_penalty <= 100)) __builtin_trap();
  for (int id : g->eos_token_ids) {
    if (id < 0) __builtin_trap();
  }
  return 0;
}
