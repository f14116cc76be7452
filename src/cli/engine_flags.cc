#include "cli/engine_flags.h"

namespace g4::cli {

void AddEngineFlags(CLI::App& app, EngineFlags& flags, const std::string& default_kv, bool batch) {
  flags.kv = default_kv;
  app.add_option("--backend", flags.backend, "where to run: cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--kv", flags.kv,
                 "KV cache scheme (docs/kv-cache.md): plain (f32), plain:bf16, plain:f16, affine:8, affine:4, "
                 "affine:4:32, turbo:k8v3, turbo:k4v3, ..., each optionally @N (plain until N tokens, then "
                 "convert), or full=SPEC,sliding=SPEC")
      ->capture_default_str();
  app.add_option("--chunk", flags.chunk, "tokens per step (the prefill chunk)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  if (batch)
    app.add_option("--max-seqs", flags.max_seqs, "sequences running at once")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
}

EngineOptions ToEngineOptions(const EngineFlags& flags) {
  EngineOptions o;
  o.kv = flags.kv;
  o.max_step_tokens = flags.chunk;
  o.max_seqs = flags.max_seqs;
  return o;
}

}  // namespace g4::cli
