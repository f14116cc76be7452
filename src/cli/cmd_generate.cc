// g4 generate MODEL_DIR "prompt": one answer, streamed to stdout, then a
// timing line on stderr. With --prompts FILE, every prompt of the file runs
// through the batched engine together and one JSON line per prompt is
// written to stdout, in input order.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/sampling_flags.h"
#include "engine/generator.h"
#include "engine/text_sink.h"
#include "tokenizer/chat_format.h"

namespace g4::cli {
namespace {

struct GenerateFlags {
  std::string model_dir, prompt, system, prompts_file;
  bool raw = false, think = false;
  SamplingFlags sampling;
  EngineFlags engine;
};

// One prompt: its text and what may differ per prompt in a JSON line.
struct PromptJob {
  std::string prompt, system;
  bool raw = false, think = false;
  SamplingParams sampling;
  int max_tokens = 0;
  std::vector<std::string> stop;
};

StatusOr<std::vector<int32_t>> PromptIds(const ModelBundle& bundle, const PromptJob& job) {
  std::vector<int32_t> ids;
  if (job.raw) {
    // Raw completion: BOS, then the text (spec 6.1: the tokenizer adds none).
    if (bundle.tokenizer->bos_id() >= 0) ids.push_back(bundle.tokenizer->bos_id());
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> text, bundle.tokenizer->Encode(job.prompt));
    ids.insert(ids.end(), text.begin(), text.end());
    return ids;
  }
  std::vector<ChatMessage> messages;
  if (!job.system.empty()) messages.push_back({.role = "system", .content = job.system});
  messages.push_back({.role = "user", .content = job.prompt});
  ChatOptions chat;
  chat.enable_thinking = job.think;
  chat.empty_thought_channel = bundle.empty_thought_channel;
  G4_ASSIGN_OR_RETURN(std::string rendered, RenderChat(messages, chat));
  return bundle.tokenizer->Encode(rendered);
}

std::vector<int> StopIds(const ModelBundle& bundle, const PromptJob& job) {
  return job.raw ? bundle.RawStopIds() : bundle.ChatStopIds();
}

Status RunOne(const GenerateFlags& f, ModelBundle& bundle, Engine& engine, const PromptJob& job) {
  G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIds(bundle, job));
  GenerateOptions options;
  options.sampling = job.sampling;
  options.max_tokens = job.max_tokens;
  options.stop_strings = job.stop;
  options.stop_ids = StopIds(bundle, job);
  Generator gen(engine, *bundle.tokenizer);
  G4_ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(ids, options, [](std::string_view text) {
                        std::fwrite(text.data(), 1, text.size(), stdout);
                        std::fflush(stdout);
                      }));
  std::printf("\n");
  std::fflush(stdout);
  const double prefill_tps = r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0;
  const double decode_tps = r.decode_seconds > 0 ? r.tokens.size() / r.decode_seconds : 0;
  std::fprintf(stderr,
               "[g4] prompt %d tokens, %.1f tok/s | decode %zu tokens, %.1f tok/s | time to first token %.0f ms | "
               "finish: %s\n",
               r.prompt_tokens, prefill_tps, r.tokens.size(), decode_tps, r.prefill_seconds * 1000,
               r.finish_reason.c_str());
  return Status::Ok();
}

// A line of --prompts: plain text, or a JSON object {"prompt": ..., and
// optionally "system", "raw", "think", "max_tokens", "temperature", "top_p",
// "top_k", "min_p", "seed", "stop": [...]} overriding the flags.
StatusOr<PromptJob> ParsePromptLine(const std::string& line, const PromptJob& defaults, int64_t line_no) {
  PromptJob job = defaults;
  const size_t first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos || line[first] != '{') {
    job.prompt = line;
    return job;
  }
  auto where = [&] { return "[generate] --prompts line " + std::to_string(line_no) + ": "; };
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(where() + "not a JSON object");
  try {
    if (!j.contains("prompt") || !j["prompt"].is_string()) return InvalidArgument(where() + "needs a \"prompt\" string");
    job.prompt = j["prompt"].get<std::string>();
    for (const auto& [key, value] : j.items()) {
      if (key == "prompt") continue;
      else if (key == "system") job.system = value.get<std::string>();
      else if (key == "raw") job.raw = value.get<bool>();
      else if (key == "think") job.think = value.get<bool>();
      else if (key == "max_tokens") job.max_tokens = value.get<int>();
      else if (key == "temperature") job.sampling.temperature = value.get<float>();
      else if (key == "top_p") job.sampling.top_p = value.get<float>();
      else if (key == "top_k") job.sampling.top_k = value.get<int>();
      else if (key == "min_p") job.sampling.min_p = value.get<float>();
      else if (key == "seed") job.sampling.seed = value.get<uint64_t>();
      else if (key == "stop") job.stop = value.get<std::vector<std::string>>();
      else return InvalidArgument(where() + "unknown field \"" + key + "\"");
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(where() + "a field has the wrong type (" + e.what() + ")");
  }
  if (job.max_tokens < 0) return InvalidArgument(where() + "max_tokens must be >= 0");
  return job;
}

Status RunBatch(const GenerateFlags& f, ModelBundle& bundle, Engine& engine, const PromptJob& defaults) {
  std::ifstream in(f.prompts_file);
  if (!in) return NotFound("[generate] cannot read " + f.prompts_file);
  std::vector<PromptJob> jobs;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines separate nothing
    G4_ASSIGN_OR_RETURN(PromptJob job, ParsePromptLine(line, defaults, n));
    jobs.push_back(std::move(job));
  }
  std::vector<std::unique_ptr<TextSink>> sinks;
  std::vector<int> prompt_tokens;
  for (const PromptJob& job : jobs) {
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIds(bundle, job));
    sinks.push_back(std::make_unique<TextSink>(*bundle.tokenizer, StopIds(bundle, job), job.stop));
    SequenceRequest req;
    req.prompt = std::move(ids);
    prompt_tokens.push_back(static_cast<int>(req.prompt.size()));
    req.max_new_tokens = job.max_tokens;
    req.sampling = job.sampling;
    for (int id : StopIds(bundle, job)) req.stop_ids.push_back(id);
    req.sink = sinks.back().get();
    G4_ASSIGN_OR_RETURN(RequestId id, engine.scheduler().Submit(std::move(req)));
    (void)id;
  }
  G4_RETURN_IF_ERROR(engine.scheduler().RunUntilIdle());
  for (size_t i = 0; i < jobs.size(); ++i) {
    GenerateResult& r = sinks[i]->result();
    nlohmann::ordered_json j;
    j["index"] = i;
    j["text"] = r.text;
    j["finish_reason"] = sinks[i]->status().ok() ? r.finish_reason : "error";
    j["prompt_tokens"] = prompt_tokens[i];
    j["completion_tokens"] = r.tokens.size();
    if (!sinks[i]->status().ok()) j["error"] = sinks[i]->status().ToString();
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::fflush(stdout);
  const SchedulerStats st = engine.scheduler().stats();
  std::fprintf(stderr, "[g4] %zu prompts | %lld steps, %lld tokens run, %lld sampled | %.2f s in the model\n",
               jobs.size(), static_cast<long long>(st.steps), static_cast<long long>(st.rows),
               static_cast<long long>(st.sampled), st.forward_seconds);
  return Status::Ok();
}

Status RunGenerateImpl(const GenerateFlags& f) {
  if (f.prompts_file.empty() == f.prompt.empty())
    return InvalidArgument("give either a prompt or --prompts FILE");
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadModelBundle(f.model_dir, f.engine.backend));
  EngineFlags ef = f.engine;
  if (f.prompts_file.empty()) ef.max_seqs = 1;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*bundle->model, ToEngineOptions(ef)));
  PromptJob defaults;
  defaults.prompt = f.prompt;
  defaults.system = f.system;
  defaults.raw = f.raw;
  defaults.think = f.think;
  defaults.sampling = ResolveSampling(f.sampling, *bundle);
  defaults.max_tokens = f.sampling.max_tokens;
  defaults.stop = f.sampling.stop;
  if (!f.prompts_file.empty()) return RunBatch(f, *bundle, *engine, defaults);
  return RunOne(f, *bundle, *engine, defaults);
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  CLI::App app{"Generate an answer to a prompt, streaming it to stdout", "g4 generate"};
  GenerateFlags f;
  app.add_option("model", f.model_dir, "model directory")->required();
  app.add_option("prompt", f.prompt, "the prompt");
  app.add_option("--prompts", f.prompts_file,
                 "file of prompts, one per line (text, or JSON objects with \"prompt\" and per-prompt options): "
                 "runs them together and prints one JSON line per prompt, in order");
  app.add_flag("--raw", f.raw, "complete the text as is, without the chat format");
  app.add_option("--system", f.system, "system prompt (chat format only)");
  app.add_flag("--think", f.think, "enable thinking (chat format only)");
  AddSamplingFlags(app, f.sampling);
  AddEngineFlags(app, f.engine, "plain:bf16", /*batch=*/true);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status s = RunGenerateImpl(f);
  if (!s.ok()) return Fail("generate", s);
  return 0;
}

}  // namespace g4::cli
