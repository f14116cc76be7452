// g4 kv-eval: what each KV cache mode costs and loses. For every mode it
// prints the cache bytes per token of context (all layers, at a 32k-token
// context, where sliding-window rings are amortized), the bytes its caches
// actually hold after this run, and, on teacher-forced decoding, the mean KL
// divergence from the plain cache's next-token distribution and the top-1
// agreement.
//
// The token sequence is a prompt (given ids, or seeded random ids) followed
// by the plain model's own greedy continuation, so the decoded text is what
// the model would actually produce; every mode is then fed exactly that
// sequence one token at a time.
//
// With --preset (a g4 synth geometry) instead of --model, only the bytes are
// computed, from the configuration alone: no weights are needed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "backend/ops.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "engine/synth_checkpoint.h"
#include "io/config.h"
#include "kv/kv_scheme.h"
#include "model/gemma4_model.h"

namespace g4::cli {
namespace {

struct KvEvalOptions {
  std::string model_dir, preset, prompt_text;
  int64_t context = 32768;
  std::vector<std::string> modes;
  int tokens = 64;
  int prompt_len = 16;
  uint32_t seed = 1;
  int64_t chunk = 512;
};

const char* const kDefaultModes[] = {"plain", "affine:8", "affine:4", "affine:4:32", "turbo:k8v3", "turbo:k4v3"};

struct ModeResult {
  std::string mode, signature;
  double bytes_per_token_32k = 0, kl = 0, top1 = 0;
  size_t allocated = 0;
};

// Mean KL(P || Q) and top-1 agreement over rows of logits.
void Compare(const std::vector<float>& p_rows, const std::vector<float>& q_rows, int64_t V, ModeResult* r) {
  const int64_t rows = static_cast<int64_t>(p_rows.size()) / V;
  double kl = 0;
  int64_t agree = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* p = &p_rows[i * V];
    const float* q = &q_rows[i * V];
    const double pm = *std::max_element(p, p + V), qm = *std::max_element(q, q + V);
    double ps = 0, qs = 0;
    for (int64_t j = 0; j < V; ++j) ps += std::exp(p[j] - pm), qs += std::exp(q[j] - qm);
    const double plse = pm + std::log(ps), qlse = qm + std::log(qs);
    for (int64_t j = 0; j < V; ++j) {
      const double lp = p[j] - plse;
      kl += std::exp(lp) * (lp - (q[j] - qlse));
    }
    agree += (std::max_element(p, p + V) - p) == (std::max_element(q, q + V) - q);
  }
  r->kl = rows ? kl / rows : 0;
  r->top1 = rows ? static_cast<double>(agree) / rows : 0;
}

Status RunKvEvalImpl(const KvEvalOptions& o) {
  if (o.tokens <= 0) return InvalidArgument("--tokens must be positive");
  std::vector<KvScheme> schemes;
  std::vector<std::string> modes = o.modes;
  if (modes.empty()) modes.assign(std::begin(kDefaultModes), std::end(kDefaultModes));
  for (const std::string& m : modes) {
    G4_ASSIGN_OR_RETURN(KvScheme s, KvScheme::Parse(m));
    schemes.push_back(s);
  }
  if (!o.preset.empty()) {
    if (o.context <= 0) return InvalidArgument("--context must be positive");
    G4_ASSIGN_OR_RETURN(std::string text, SynthConfigJson(o.preset, "bf16"));
    G4_ASSIGN_OR_RETURN(Gemma4Config config, ParseGemma4Config(text));
    std::printf("preset %s: KV cache at a %lld-token context\n", o.preset.c_str(), static_cast<long long>(o.context));
    std::printf("%-14s %16s %12s  %s\n", "mode", "bytes/token", "total GiB", "scheme");
    for (size_t i = 0; i < schemes.size(); ++i) {
      G4_ASSIGN_OR_RETURN(std::unique_ptr<SequenceKv> kv, SequenceKv::Make(config, schemes[i]));
      const double bytes = static_cast<double>(kv->ProjectedBytes(o.context));
      std::printf("%-14s %16.1f %12.3f  %s\n", modes[i].c_str(), bytes / o.context, bytes / (1u << 30),
                  schemes[i].signature().c_str());
    }
    return Status::Ok();
  }
  if (o.model_dir.empty()) return InvalidArgument("give --model DIR (or --preset NAME for bytes only)");
  auto ops = MakeCpuOps();
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Gemma4Model> model, Gemma4Model::Load(o.model_dir, ops.get()));
  const int64_t V = model->vocab_size();
  std::vector<int32_t> prompt;
  if (!o.prompt_text.empty()) {
    G4_ASSIGN_OR_RETURN(prompt, ParseIdList(o.prompt_text));
  } else {
    if (o.prompt_len <= 0) return InvalidArgument("--prompt-len must be positive");
    std::mt19937 rng(o.seed);
    for (int i = 0; i < o.prompt_len; ++i) prompt.push_back(static_cast<int32_t>(rng() % V));
  }
  if (prompt.empty()) return InvalidArgument("empty prompt");

  // Reference: plain caches, greedy continuation.
  G4_ASSIGN_OR_RETURN(std::unique_ptr<SequenceKv> plain, SequenceKv::Make(model->config(), KvScheme{}));
  std::vector<float> ref(static_cast<size_t>(o.tokens) * V);
  std::vector<int32_t> continuation(o.tokens);
  G4_RETURN_IF_ERROR(model->ForwardChunked(prompt.data(), prompt.size(), o.chunk, *plain, ref.data(), false));
  for (int t = 0; t < o.tokens; ++t) {
    const float* row = &ref[static_cast<size_t>(t) * V];
    continuation[t] = static_cast<int32_t>(std::max_element(row, row + V) - row);
    if (t + 1 < o.tokens) G4_RETURN_IF_ERROR(model->Forward(&continuation[t], 1, *plain, &ref[(t + 1) * V], false));
  }

  std::vector<ModeResult> results;
  for (size_t i = 0; i < schemes.size(); ++i) {
    G4_ASSIGN_OR_RETURN(std::unique_ptr<SequenceKv> kv, SequenceKv::Make(model->config(), schemes[i]));
    std::vector<float> rows(ref.size());
    G4_RETURN_IF_ERROR(model->ForwardChunked(prompt.data(), prompt.size(), o.chunk, *kv, rows.data(), false));
    for (int t = 0; t + 1 < o.tokens; ++t)
      G4_RETURN_IF_ERROR(model->Forward(&continuation[t], 1, *kv, &rows[(t + 1) * V], false));
    ModeResult r;
    r.mode = modes[i];
    r.signature = schemes[i].signature();
    r.allocated = kv->allocated_bytes();
    r.bytes_per_token_32k = static_cast<double>(kv->ProjectedBytes(32768)) / 32768;
    Compare(ref, rows, V, &r);
    results.push_back(r);
  }
  std::printf("model %s: %zu prompt tokens + %d teacher-forced decode steps\n", o.model_dir.c_str(), prompt.size(),
              o.tokens);
  std::printf("%-14s %16s %14s %12s %8s  %s\n", "mode", "bytes/token@32k", "allocated", "KL vs plain", "top-1",
              "scheme");
  for (const ModeResult& r : results)
    std::printf("%-14s %16.1f %14zu %12.4e %8.4f  %s\n", r.mode.c_str(), r.bytes_per_token_32k, r.allocated, r.kl,
                r.top1, r.signature.c_str());
  return Status::Ok();
}

}  // namespace

int RunKvEval(int argc, char** argv) {
  CLI::App app{"Bytes per token and quality (KL, top-1 vs plain) of each KV cache mode", "g4 kv-eval"};
  KvEvalOptions o;
  auto* model = app.add_option("--model", o.model_dir, "checkpoint directory (config.json + safetensors)");
  app.add_option("--preset", o.preset, "instead of --model: bytes only, for a g4 synth geometry (e.g. e4b, 31b)")
      ->excludes(model);
  app.add_option("--context", o.context, "context length for --preset")->capture_default_str();
  app.add_option("--tokens", o.tokens, "teacher-forced decode steps")->capture_default_str();
  app.add_option("--prompt-ids", o.prompt_text, "prompt token ids, comma separated (default: random ids)");
  app.add_option("--prompt-len", o.prompt_len, "length of the random prompt")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random prompt")->capture_default_str();
  app.add_option("--mode", o.modes,
                 "KV mode to evaluate (repeatable; default: plain, affine:8, affine:4, affine:4:32, turbo:k8v3, "
                 "turbo:k4v3); same syntax as g4 logits --kv");
  app.add_option("--chunk", o.chunk, "prefill chunk size")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status s = RunKvEvalImpl(o);
  if (!s.ok()) return Fail("kv-eval", s);
  return 0;
}

}  // namespace g4::cli
