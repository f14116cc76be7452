// g4 logits: the parity tool. Runs prompts (and optionally greedy or
// teacher-forced decode steps) and writes every logit row to safetensors.
// Several --ids run together as one batch; each sequence's tensors are
// suffixed with its index (logits.0, logits.1, ...), except that a single
// --ids keeps the plain names (logits, greedy_ids, ...).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "backend/cpu/cpu_backend.h"
#include "cli/cli_util.h"
#include "cli/command_line.h"
#include "cli/warm_checkpoint.h"
#include "core/limits.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/backend_factory.h"
#include "engine/engine.h"
#include "io/safetensors.h"

namespace g4::cli {
namespace {

struct LogitsOptions {
  CommonFlags common;
  std::string decode_text, out;
  std::vector<std::string> ids_texts;
  int greedy = 0;
  EngineFlags engine;
};

// Collects the logits rows of one request by token index.
class RowsSink final : public SequenceSink {
 public:
  explicit RowsSink(int64_t vocab) : vocab_(vocab) {}
  void OnLogits(int64_t index, std::span<const float> logits) override {
    if (static_cast<int64_t>(rows_.size()) < (index + 1) * vocab_) rows_.resize((index + 1) * vocab_);
    std::copy(logits.begin(), logits.end(), rows_.begin() + index * vocab_);
  }
  bool OnToken(int32_t token, const LogProbs*) override {
    tokens_.push_back(token);
    return true;
  }
  void OnFinish(FinishReason, KvSeq, const Status& status) override { status_ = status; }

  const std::vector<float>& rows() const { return rows_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const Status& status() const { return status_; }

 private:
  int64_t vocab_;
  std::vector<float> rows_;
  std::vector<int32_t> tokens_;
  Status status_;
};

Status RunLogitsImpl(const LogitsOptions& o) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : o.ids_texts) {
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIdList(text));
    if (ids.empty()) return InvalidArgument("--ids: empty list");
    prompts.push_back(std::move(ids));
  }
  std::vector<int32_t> decode_ids;
  if (!o.decode_text.empty()) {
    G4_ASSIGN_OR_RETURN(decode_ids, ParseIdList(o.decode_text));
  }
  if (o.greedy < 0) return InvalidArgument("--greedy must be >= 0");
  G4_ASSIGN_OR_RETURN(std::string dir, ResolveModel(o.common));
  WarmCheckpoint(dir, !o.common.quiet);
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeBackend(o.engine.backend));
  Verbose(o.common, "backend " + backend->Describe() + " (OpenMP threads " + std::to_string(omp_get_max_threads()) +
                        "), kv " + o.engine.kv + ", chunk " + std::to_string(o.engine.chunk));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Gemma4Model> model, Gemma4Model::Load(dir, *backend));
  const int64_t V = model->vocab_size();
  // Every row is kept until the file is written: bound them before running
  // (and before the scheduler would refuse a sequence longer than the
  // context, which it does itself).
  uint64_t rows = 0;
  for (const auto& ids : prompts) rows += ids.size() + o.greedy + (decode_ids.empty() ? 0 : decode_ids.size() + 1);
  const uint64_t row_bytes = static_cast<uint64_t>(V) * sizeof(float);
  if (rows * row_bytes > kMaxKeptLogitBytes)
    return UsageStatus(std::to_string(rows) + " logit rows (prompts, --greedy, --decode-ids) would take " +
                       std::to_string(rows * row_bytes >> 20) + " MiB; at most " +
                       std::to_string(kMaxKeptLogitBytes / row_bytes) + " rows fit the limit of " +
                       std::to_string(kMaxKeptLogitBytes >> 20) + " MiB (kMaxKeptLogitBytes) with this model's " +
                       "vocabulary of " + std::to_string(V));
  EngineOptions eo = ToEngineOptions(o.engine);
  eo.max_seqs = static_cast<int>(2 * prompts.size());
  eo.max_outputs = eo.max_step_tokens;  // every row of a chunk is an output
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*model, eo));

  // Per prompt: one request for the prompt (+ greedy steps), one for the
  // teacher-forced decode ids.
  std::vector<std::unique_ptr<RowsSink>> main_sinks, forced_sinks;
  for (const auto& ids : prompts) {
    main_sinks.push_back(std::make_unique<RowsSink>(V));
    SequenceRequest req;
    req.prompt = ids;
    req.logits_from = 0;
    req.max_new_tokens = o.greedy;
    req.sampling.temperature = 0;  // greedy: argmax, lowest id on ties
    req.sink = main_sinks.back().get();
    G4_ASSIGN_OR_RETURN(RequestId id, engine->scheduler().Submit(std::move(req)));
    (void)id;
    if (decode_ids.empty()) continue;
    forced_sinks.push_back(std::make_unique<RowsSink>(V));
    SequenceRequest forced;
    forced.prompt = ids;
    forced.forced = decode_ids;
    forced.logits_from = static_cast<int64_t>(ids.size());
    forced.sink = forced_sinks.back().get();
    G4_ASSIGN_OR_RETURN(RequestId fid, engine->scheduler().Submit(std::move(forced)));
    (void)fid;
  }
  G4_RETURN_IF_ERROR(engine->scheduler().RunUntilIdle());

  SafetensorsWriter out;
  out.SetMetadata("kv", engine->pool().scheme().signature());
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string suffix = prompts.size() == 1 ? "" : "." + std::to_string(p);
    const RowsSink& m = *main_sinks[p];
    G4_RETURN_IF_ERROR(m.status());
    const int64_t L = static_cast<int64_t>(prompts[p].size());
    out.AddF32("logits" + suffix, {L, V}, m.rows().data());
    out.AddI32("ids" + suffix, {L}, prompts[p].data());
    if (o.greedy > 0) {
      // Row 0 is the last prompt position; each step fed the previous argmax.
      std::vector<float> rows(m.rows().begin() + (L - 1) * V, m.rows().begin() + (L - 1 + o.greedy) * V);
      out.AddI32("greedy_ids" + suffix, {o.greedy}, m.tokens().data());
      out.AddF32("greedy_logits" + suffix, {o.greedy, V}, rows.data());
    }
    if (!decode_ids.empty()) {
      const RowsSink& f = *forced_sinks[p];
      G4_RETURN_IF_ERROR(f.status());
      const int64_t K = static_cast<int64_t>(decode_ids.size());
      out.AddF32("decode_logits" + suffix, {K, V}, f.rows().data() + L * V);
    }
  }
  return out.Write(o.out);
}

}  // namespace

int RunLogits(int argc, char** argv) {
  CLI::App app{"Write logits for prompts (and greedy / teacher-forced decode) to a safetensors file", "g4 logits"};
  LogitsOptions o;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  AddCommonFlags(app, o.common, kModelFlag | kThreadsFlag);
  app.add_option("--ids", o.ids_texts,
                 "prompt token ids, comma separated; repeat for several sequences run as one batch "
                 "(tensors logits.0, logits.1, ...)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->required();
  app.add_option("--greedy", o.greedy, "greedy steps: writes greedy_ids [N] and greedy_logits [N, V]")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("--decode-ids", o.decode_text,
                 "ids fed one by one after each prompt: writes decode_logits [K, V]");
  AddEngineFlags(app, o.engine, "plain");
  app.add_option("-o,--out", o.out, "output safetensors file")->required();
  if (auto code = ParseCommandLine(app, "logits", argc, argv)) return *code;
  Status s = FinishCommonFlags(o.common, {&positional_model});
  if (s.ok()) s = RunLogitsImpl(o);
  return s.ok() ? kExitOk : Fail("logits", s);
}

}  // namespace g4::cli
