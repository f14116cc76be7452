#include "cli/foreign_flags.h"

#include <initializer_list>

namespace g4::cli {
namespace {

struct Foreign {
  std::initializer_list<const char*> names;
  const char* hint;
};

// llama.cpp spellings first (the commonest habit), then mlx_lm's.
const Foreign kForeign[] = {
    {{"-ngl", "--n-gpu-layers", "--gpu-layers", "-ngld", "--n-gpu-layers-draft"},
     "GPU offload: use --backend cuda (the whole model runs on the GPU) or --backend cpu"},
    {{"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu"},
     "g4 runs on one device: choose it with --backend"},
    {{"-fa", "--flash-attn"}, "attention is always fused in g4: drop the flag"},
    {{"--mlock", "--no-mmap", "--mmap"}, "g4 always memory-maps the weights: drop the flag"},
    {{"-b", "--batch-size", "-ub", "--ubatch-size"}, "tokens per step: use --chunk N"},
    {{"-np", "--parallel"}, "sequences at once: use --max-seqs N"},
    {{"-ctk", "--cache-type-k", "-ctv", "--cache-type-v"}, "KV cache precision: use --kv SPEC (docs/kv-cache.md)"},
    {{"-tb", "--threads-batch"}, "use -t/--threads (one setting for prefill and decode)"},
    {{"-hf", "-hfr", "--hf-repo", "--hf-file"},
     "give the repo id to -m (ORG/NAME, found in the Hugging Face cache; docs/models.md)"},
    {{"-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first"}, "use g4 chat"},
    {{"--n-predict"}, "use -n/--max-tokens N"},
    {{"--max-kv-size"}, "use -c/--ctx-size N"},
    {{"--top-nsigma", "--typical", "--mirostat", "--mirostat-lr", "--mirostat-ent", "--dry-multiplier"},
     "this sampler is not implemented; docs/sampling.md lists what is"},
    {{"--ignore-eos"}, "not supported: generation always stops at the model's end-of-turn"},
    {{"--no-warmup", "--warmup"}, "g4 does no warm-up run: drop the flag"},
    {{"--log-disable", "--no-display-prompt", "--verbose-prompt"}, "use -q/--quiet or -v/--verbose"},
    {{"--max-tokens-per-step"}, "use --chunk N"},
};

}  // namespace

std::optional<std::string> ForeignFlagHint(std::string_view flag) {
  const size_t eq = flag.find('=');
  if (eq != std::string_view::npos) flag = flag.substr(0, eq);
  for (const Foreign& f : kForeign)
    for (const char* name : f.names)
      if (flag == name) return std::string(f.hint);
  return std::nullopt;
}

}  // namespace g4::cli
