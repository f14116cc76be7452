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
// With --preset (a g4 synth geometry) instead of a model, only the bytes are
// computed, from the configuration alone: no weights are needed.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <cmath>
#include <cstdio>
#include <random>

#include "cli/cli_util.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/warm_checkpoint.h"
#include "core/limits.h"
#include "engine/backend_factory.h"
#include "engine/engine.h"
#include "engine/logit_stats.h"
#include "engine/synth_checkpoint.h"
#include "io/config.h"
#include "kv/kv_scheme.h"

namespace g4::cli {
namespace {

struct KvEvalOptions {
  CommonFlags common;
  std::string preset, prompt_text, backend = "auto";
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

// Logits rows from index `first` on, the sampled tokens, and the KV back.
// Without `reference` it keeps the rows; with one it keeps only the KL from
// the reference's row of the same index and the top-1 agreement (so a mode
// costs no row memory: only the reference's rows are kept, bounded by
// kMaxKeptLogitBytes).
class EvalSink final : public SequenceSink {
 public:
  EvalSink(int64_t first, int64_t vocab, const std::vector<float>* reference = nullptr)
      : first_(first), vocab_(vocab), reference_(reference) {}
  void OnLogits(int64_t index, std::span<const float> logits) override {
    const size_t at = static_cast<size_t>((index - first_) * vocab_);
    if (reference_) {
      if (at + vocab_ > reference_->size()) return;  // past the reference's rows: not compared
      std::span<const float> p(reference_->data() + at, vocab_);
      kl_sum_ += KlDivergence(p, logits);
      agree_ += SameTop1(p, logits);
      ++compared_;
      return;
    }
    if (rows_.size() < at + vocab_) rows_.resize(at + vocab_);
    std::copy(logits.begin(), logits.end(), rows_.begin() + at);
  }
  bool OnToken(int32_t token, const LogProbs*) override {
    tokens_.push_back(token);
    return true;
  }
  void OnFinish(FinishReason, KvSeq seq, const Status& status) override {
    seq_ = std::move(seq);
    status_ = status;
  }
  std::vector<float> rows_;
  std::vector<int32_t> tokens_;
  KvSeq seq_;
  Status status_;
  double kl_sum_ = 0;
  int64_t agree_ = 0, compared_ = 0;

 private:
  int64_t first_, vocab_;
  const std::vector<float>* reference_;
};

Status RunKvEvalImpl(const KvEvalOptions& o) {
  if (o.tokens <= 0) return InvalidArgument("--tokens must be positive");
  std::vector<KvScheme> schemes;
  std::vector<std::string> modes = o.modes;
  if (modes.empty()) modes.assign(std::begin(kDefaultModes), std::end(kDefaultModes));
  for (const std::string& m : modes) {
    G4_ASSIGN_OR_RETURN(KvScheme s, KvScheme::Parse(m));
    schemes.push_back(s);
  }
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeBackend(o.backend));
  if (!o.preset.empty()) {
    if (o.context <= 0) return InvalidArgument("--context must be positive");
    G4_ASSIGN_OR_RETURN(std::string text, SynthConfigJson(o.preset, "bf16"));
    G4_ASSIGN_OR_RETURN(Gemma4Config config, ParseGemma4Config(text));
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    if (!o.common.json) {
      std::printf("preset %s: KV cache at a %lld-token context\n", o.preset.c_str(), static_cast<long long>(o.context));
      std::printf("%-14s %16s %12s  %s\n", "mode", "bytes/token", "total GiB", "scheme");
    }
    for (size_t i = 0; i < schemes.size(); ++i) {
      // An empty pool: its projection needs the formats, not storage.
      G4_ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool, KvPool::Create(config, schemes[i], *backend, KvPoolOptions{}));
      const double bytes = static_cast<double>(pool->ProjectedBytes(o.context));
      if (o.common.json) {
        rows.push_back({{"mode", modes[i]}, {"scheme", schemes[i].signature()}, {"bytes_per_token", bytes / o.context},
                        {"total_bytes", bytes}});
        continue;
      }
      std::printf("%-14s %16.1f %12.3f  %s\n", modes[i].c_str(), bytes / o.context, bytes / (1u << 30),
                  schemes[i].signature().c_str());
    }
    if (o.common.json) {
      nlohmann::ordered_json j = {{"preset", o.preset}, {"context", o.context}, {"modes", rows}};
      std::printf("%s\n", j.dump().c_str());
    }
    return Status::Ok();
  }
  G4_ASSIGN_OR_RETURN(std::string dir, ResolveModel(o.common));
  WarmCheckpoint(dir, !o.common.quiet);
  Verbose(o.common, "backend " + backend->Describe() + " (OpenMP threads " + std::to_string(omp_get_max_threads()) + ")");
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Gemma4Model> model, Gemma4Model::Load(dir, *backend));
  const int64_t V = model->vocab_size();
  // Before any memory is spent: the sequence must fit the model's context,
  // and the reference's logit rows must fit kMaxKeptLogitBytes.
  const int64_t ctx = model->config().max_position_embeddings;
  const int64_t given_len =
      o.prompt_text.empty() ? o.prompt_len : 1 + std::count(o.prompt_text.begin(), o.prompt_text.end(), ',');
  if (ctx > 0 && given_len + o.tokens > ctx)
    return UsageStatus("a prompt of " + std::to_string(given_len) + " tokens and --tokens " +
                       std::to_string(o.tokens) + " exceed the model's context of " + std::to_string(ctx) + " tokens");
  const uint64_t row_bytes = static_cast<uint64_t>(V) * sizeof(float);
  if (static_cast<uint64_t>(o.tokens) * row_bytes > kMaxKeptLogitBytes)
    return UsageStatus("--tokens " + std::to_string(o.tokens) + " would keep " +
                       std::to_string(static_cast<uint64_t>(o.tokens) * row_bytes >> 20) +
                       " MiB of reference logits; at most " + std::to_string(kMaxKeptLogitBytes / row_bytes) +
                       " tokens fit the limit of " + std::to_string(kMaxKeptLogitBytes >> 20) +
                       " MiB (kMaxKeptLogitBytes) with this model's vocabulary of " + std::to_string(V));
  std::vector<int32_t> prompt;
  if (!o.prompt_text.empty()) {
    G4_ASSIGN_OR_RETURN(prompt, ParseIdList(o.prompt_text));
  } else {
    if (o.prompt_len <= 0) return InvalidArgument("--prompt-len must be positive");
    std::mt19937 rng(o.seed);
    for (int i = 0; i < o.prompt_len; ++i) prompt.push_back(static_cast<int32_t>(rng() % V));
  }
  if (prompt.empty()) return InvalidArgument("empty prompt");
  const int64_t L = static_cast<int64_t>(prompt.size());
  EngineOptions eo;
  eo.max_step_tokens = o.chunk;
  eo.max_seqs = 1;

  // Reference: plain f32 caches, the greedy continuation.
  eo.kv = "plain";
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> plain, Engine::Create(*model, eo));
  EvalSink ref(L - 1, V);
  ref.rows_.reserve(static_cast<size_t>(o.tokens) * V);  // one allocation, within the check above
  {
    SequenceRequest req;
    req.prompt = prompt;
    req.max_new_tokens = o.tokens;
    req.sampling.temperature = 0;
    req.logits_from = L - 1;
    req.sink = &ref;
    G4_ASSIGN_OR_RETURN(RequestId id, plain->scheduler().Submit(std::move(req)));
    (void)id;
    G4_RETURN_IF_ERROR(plain->scheduler().RunUntilIdle());
    G4_RETURN_IF_ERROR(ref.status_);
  }
  // Every mode is fed exactly that continuation, one token per step.
  const std::vector<int32_t> forced(ref.tokens_.begin(), ref.tokens_.end() - 1);
  std::vector<ModeResult> results;
  for (size_t i = 0; i < schemes.size(); ++i) {
    eo.kv = modes[i];
    G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*model, eo));
    EvalSink sink(L - 1, V, &ref.rows_);
    SequenceRequest req;
    req.prompt = prompt;
    req.forced = forced;
    req.logits_from = L - 1;
    req.sink = &sink;
    G4_ASSIGN_OR_RETURN(RequestId id, engine->scheduler().Submit(std::move(req)));
    (void)id;
    G4_RETURN_IF_ERROR(engine->scheduler().RunUntilIdle());
    G4_RETURN_IF_ERROR(sink.status_);
    ModeResult r;
    r.mode = modes[i];
    r.signature = schemes[i].signature();
    r.allocated = engine->pool().used_bytes();  // the finished sequence still holds its blocks
    r.bytes_per_token_32k = static_cast<double>(engine->pool().ProjectedBytes(32768)) / 32768;
    if (sink.compared_ == 0) return Internal("[kv-eval] mode " + modes[i] + " produced no logits to compare");
    r.kl = sink.kl_sum_ / sink.compared_;
    r.top1 = static_cast<double>(sink.agree_) / sink.compared_;
    results.push_back(r);
  }
  if (o.common.json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const ModeResult& r : results)
      rows.push_back({{"mode", r.mode}, {"scheme", r.signature}, {"bytes_per_token_32k", r.bytes_per_token_32k},
                      {"allocated_bytes", r.allocated}, {"kl_vs_plain", r.kl}, {"top1_agreement", r.top1}});
    nlohmann::ordered_json j = {{"model", o.common.model}, {"prompt_tokens", prompt.size()},
                                {"decode_steps", o.tokens}, {"modes", rows}};
    std::printf("%s\n", j.dump().c_str());
    return Status::Ok();
  }
  std::printf("model %s: %zu prompt tokens + %d teacher-forced decode steps\n", o.common.model.c_str(), prompt.size(),
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
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  AddCommonFlags(app, o.common, kModelFlag | kThreadsFlag | kJsonFlag);
  app.add_option("--preset", o.preset, "instead of a model: bytes only, for a g4 synth geometry (e.g. e4b, 31b)")
      ->check(CLI::IsMember(SynthPresetNames()));
  app.add_option("-c,--ctx-size,--context", o.context, "context length for --preset")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--tokens", o.tokens, "teacher-forced decode steps")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--prompt-ids", o.prompt_text, "prompt token ids, comma separated (default: random ids)");
  app.add_option("--prompt-len", o.prompt_len, "length of the random prompt")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random prompt")->capture_default_str();
  app.add_option("--kv,--mode", o.modes,
                 "KV mode to evaluate, one per use (default: plain, affine:8, affine:4, affine:4:32, turbo:k8v3, "
                 "turbo:k4v3); docs/kv-cache.md")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--chunk", o.chunk, "prefill chunk size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  AddBackendFlag(app, o.backend);
  if (auto code = ParseCommandLine(app, "kv-eval", argc, argv)) return *code;
  Status s = FinishCommonFlags(o.common, {&positional_model}, /*model_required=*/false);
  if (s.ok() && o.common.model.empty() == o.preset.empty())
    s = UsageStatus("give a model (-m MODEL) or --preset NAME (bytes only), not both");
  if (s.ok()) s = RunKvEvalImpl(o);
  return s.ok() ? kExitOk : Fail("kv-eval", s);
}

}  // namespace g4::cli
