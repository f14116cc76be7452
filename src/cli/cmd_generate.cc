// g4 generate -m MODEL "prompt": one answer, streamed to stdout, then a
// timing line on stderr (or, with --json / --logprobs N, one JSON object).
// With --prompts FILE, every prompt of the file runs through the batched
// engine together and one JSON line per prompt is written to stdout, in
// input order (cli/generate_job.cc).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/generate_job.h"
#include "cli/prefill.h"
#include "cli/session_file.h"
#include "core/mapped_file.h"
#include "engine/generator.h"

namespace g4::cli {
namespace {

// The decoded text of one token (JSON-safe: invalid UTF-8 is replaced when
// dumped).
nlohmann::ordered_json LogProbsJson(const Tokenizer& tok, const LogProbs& lp) {
  auto text = [&](int id) { return tok.Decode(std::vector<int32_t>{id}); };
  nlohmann::ordered_json j = {{"id", lp.token}, {"token", text(lp.token)}, {"logprob", lp.logprob}};
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  for (const TokenLogProb& t : lp.top) top.push_back({{"id", t.id}, {"token", text(t.id)}, {"logprob", t.logprob}});
  j["top"] = std::move(top);
  return j;
}

// Loads --prompt-cache into `gen` when it holds a prefix of `ids`. A file of
// another model or scheme, or a damaged one, is reported and replaced.
std::vector<int32_t> UsePromptCache(const GenerateFlags& f, Engine& engine, Generator& gen,
                                    const KvFileIdentity& identity, const std::vector<int32_t>& ids) {
  if (f.prompt_cache.empty()) return {};
  std::error_code ec;
  if (!std::filesystem::exists(f.prompt_cache, ec)) {
    Verbose(f.common, "prompt cache " + f.prompt_cache + ": not there yet; it will be written");
    return {};
  }
  StatusOr<LoadedKv> loaded = LoadSession(f.prompt_cache, engine, identity);
  if (!loaded.ok()) {
    if (!f.common.quiet)
      std::fprintf(stderr, "[g4] prompt cache not used (%s); it will be replaced\n",
                   EscapeForTerminal(loaded.status().ToString()).c_str());
    return {};
  }
  std::vector<int32_t> tokens = loaded->tokens;
  const bool prefix = tokens.size() < ids.size() && std::equal(tokens.begin(), tokens.end(), ids.begin());
  if (prefix) {
    gen.Adopt(std::move(loaded->seq), loaded->tokens);
    Verbose(f.common, "prompt cache " + f.prompt_cache + ": reusing " + std::to_string(tokens.size()) + " tokens");
  } else {
    Verbose(f.common, "prompt cache " + f.prompt_cache + ": holds another prompt; it will be replaced");
  }
  return tokens;
}

Status RunOne(const GenerateFlags& f, const std::string& model_dir, ModelBundle& bundle, Engine& engine,
              PromptJob job) {
  G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIds(bundle, job));
  G4_RETURN_IF_ERROR(FitContext(f.ctx, bundle, ids.size(), &job.max_tokens));
  GenerateOptions options;
  options.sampling = job.sampling;
  options.max_tokens = job.max_tokens;
  options.stop_strings = job.stop;
  options.stop_ids = StopIds(bundle, job);
  options.top_logprobs = f.logprobs;
  Generator gen(engine, *bundle.tokenizer);
  KvFileIdentity identity;
  std::vector<int32_t> file_tokens;
  if (!f.prompt_cache.empty()) {
    identity = SessionIdentity(bundle, model_dir);
    file_tokens = UsePromptCache(f, engine, gen, identity, ids);
  }
  G4_ASSIGN_OR_RETURN(PrefillStats pre, Prefill(gen, ids, 4 * f.engine.chunk, !f.common.quiet));
  if (!f.prompt_cache.empty() && gen.cached_tokens() != file_tokens) {
    Status saved = SaveSession(f.prompt_cache, engine, gen, identity);
    if (!saved.ok()) return saved.WithContext("[generate] --prompt-cache");
    Verbose(f.common, "prompt cache " + f.prompt_cache + ": saved " + std::to_string(gen.cached_tokens().size()) +
                          " tokens");
  }
  const bool json = f.common.json || f.logprobs >= 0;
  auto stream = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  G4_ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(ids, options, json ? std::function<void(std::string_view)>() : stream));
  const double prefill_s = pre.seconds + r.prefill_seconds;
  const int run_tokens = static_cast<int>(pre.ran) + (r.prompt_tokens - r.reused_tokens);
  const double prefill_tps = prefill_s > 0 ? run_tokens / prefill_s : 0;
  const double decode_tps = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
  if (json) {
    nlohmann::ordered_json j;
    j["text"] = r.text;
    j["finish_reason"] = r.finish_reason;
    j["prompt_tokens"] = r.prompt_tokens;
    j["cached_tokens"] = pre.reused;
    j["completion_tokens"] = r.tokens.size();
    j["seed"] = *job.sampling.seed;
    j["ttft_ms"] = prefill_s * 1000;
    j["prefill_tok_s"] = prefill_tps;
    j["decode_tok_s"] = decode_tps;
    if (f.logprobs >= 0) {
      nlohmann::ordered_json lps = nlohmann::ordered_json::array();
      for (const LogProbs& lp : r.logprobs) lps.push_back(LogProbsJson(*bundle.tokenizer, lp));
      j["logprobs"] = std::move(lps);
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
    return Status::Ok();
  }
  std::printf("\n");
  std::fflush(stdout);
  if (!f.common.quiet)
    std::fprintf(stderr,
                 "[g4] prompt %d tokens (%lld cached), %.1f tok/s | decode %zu tokens, %.1f tok/s | time to first "
                 "token %.0f ms | finish: %s\n",
                 r.prompt_tokens, static_cast<long long>(pre.reused), prefill_tps, r.tokens.size(), decode_tps,
                 prefill_s * 1000, r.finish_reason.c_str());
  return Status::Ok();
}

Status RunGenerateImpl(GenerateFlags& f) {
  if (!f.file.empty()) {
    G4_ASSIGN_OR_RETURN(f.prompt, ReadFileToString(f.file));
  }
  std::string model_dir;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadBundle(f.common, f.engine.backend, &model_dir));
  EngineFlags ef = f.engine;
  if (f.prompts_file.empty()) ef.max_seqs = 1;
  Verbose(f.common, "kv " + ef.kv + ", chunk " + std::to_string(ef.chunk) + ", max_seqs " +
                        std::to_string(ef.max_seqs) + ", context " + std::to_string(ContextSize(f.ctx, *bundle)));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*bundle->model, ToEngineOptions(ef)));
  PromptJob defaults;
  defaults.prompt = f.prompt;
  defaults.system = f.system;
  defaults.raw = f.raw;
  defaults.think = f.think;
  G4_ASSIGN_OR_RETURN(defaults.sampling, ResolveSampling(f.sampling, *bundle));
  defaults.max_tokens = f.sampling.max_tokens;
  defaults.stop = f.sampling.stop;
  Verbose(f.common, "sampling: " + DescribeSampling(defaults.sampling) + ", max_tokens " +
                        std::to_string(defaults.max_tokens));
  if (!f.prompts_file.empty()) {
    // Without --seed every prompt draws its own seed (printed per line).
    if (f.sampling.seed < 0) defaults.sampling.seed.reset();
    return RunBatch(f, *bundle, *engine, defaults);
  }
  return RunOne(f, model_dir, *bundle, *engine, defaults);
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  CLI::App app{"Generate an answer to a prompt, streaming it to stdout", "g4 generate"};
  GenerateFlags f;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  app.add_option("PROMPT", f.prompt, "the prompt");
  AddCommonFlags(app, f.common, kModelFlag | kThreadsFlag | kJsonFlag);
  std::string prompt_opt;
  app.add_option("-p,--prompt", prompt_opt, "the prompt (instead of the PROMPT argument)");
  app.add_option("-f,--file", f.file, "read the prompt from this file")->check(ReadableFile());
  app.add_option("--prompts", f.prompts_file,
                 "file of prompts, one per line (text, or JSON objects with \"prompt\" and per-prompt options): "
                 "runs them together and prints one JSON line per prompt, in order")
      ->check(ReadableFile());
  app.add_flag("--raw", f.raw, "complete the text as is, without the chat format");
  app.add_option("--system", f.system, "system prompt (chat format only)");
  app.add_flag("--think", f.think, "enable thinking (chat format only)");
  AddContextFlag(app, f.ctx,
                 "context size: prompt + answer tokens at most (default 0: the model's max_position_embeddings)");
  AddSamplingFlags(app, f.sampling);
  app.add_option("--logprobs", f.logprobs,
                 "report the log-probability of each token and of its N likeliest alternatives (JSON output)")
      ->check(CLI::Range(0, 20));
  app.add_option("--prompt-cache", f.prompt_cache,
                 "KV cache file (.g4kv): reused when the prompt extends the one it holds; written after the prompt");
  AddEngineFlags(app, f.engine, "plain:bf16", /*batch=*/true);
  if (auto code = ParseCommandLine(app, "generate", argc, argv)) return *code;
  Status s = FinishCommonFlags(f.common, {&positional_model, &f.prompt});
  if (s.ok() && !prompt_opt.empty()) {
    if (!f.prompt.empty()) s = UsageStatus("give the prompt once: as an argument or with -p, not both");
    f.prompt = prompt_opt;
  }
  const int sources = !f.prompt.empty() + !f.file.empty() + !f.prompts_file.empty();
  if (s.ok() && sources != 1)
    s = UsageStatus(sources == 0 ? "no prompt: give PROMPT, -p TEXT, -f FILE or --prompts FILE"
                                 : "give one of PROMPT / -p, -f FILE and --prompts FILE");
  if (s.ok() && !f.prompts_file.empty() && (!f.prompt_cache.empty() || f.logprobs >= 0))
    s = UsageStatus("--prompt-cache and --logprobs work on one prompt, not with --prompts");
  if (s.ok()) s = RunGenerateImpl(f);
  return s.ok() ? kExitOk : Fail("generate", s);
}

}  // namespace g4::cli
