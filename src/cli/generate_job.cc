// g4 generate's prompt handling shared by one prompt and --prompts FILE, and
// the batched run over a prompts file.
#include "cli/generate_job.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/chat_session.h"
#include "core/mapped_file.h"
#include "engine/text_sink.h"
#include "tokenizer/chat_format.h"

namespace g4::cli {
namespace {

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

}  // namespace

StatusOr<std::vector<int32_t>> PromptIds(const ModelBundle& bundle, const PromptJob& job) {
  std::vector<int32_t> ids;
  if (job.raw) {
    // Raw completion: BOS, then the text (the tokenizer adds none itself).
    if (bundle.tokenizer->bos_id() >= 0) ids.push_back(bundle.tokenizer->bos_id());
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> text, bundle.tokenizer->Encode(job.prompt));
    ids.insert(ids.end(), text.begin(), text.end());
    return ids;
  }
  std::vector<ChatMessage> messages;
  if (!job.system.empty()) messages.push_back(TextMessage("system", job.system));
  messages.push_back(TextMessage("user", job.prompt));
  ChatOptions chat;
  chat.enable_thinking = job.think;
  chat.empty_thought_channel = bundle.empty_thought_channel;
  G4_ASSIGN_OR_RETURN(std::string rendered, RenderChat(messages, chat));
  return bundle.tokenizer->Encode(rendered);
}

std::vector<int> StopIds(const ModelBundle& bundle, const PromptJob& job) {
  return job.raw ? bundle.RawStopIds() : bundle.ChatStopIds();
}

int64_t ContextSize(int64_t ctx, const ModelBundle& bundle) {
  return ctx > 0 ? ctx : bundle.model->config().max_position_embeddings;
}

Status FitContext(int64_t ctx, const ModelBundle& bundle, size_t prompt_tokens, int* max_tokens) {
  const int64_t c = ContextSize(ctx, bundle);
  if (c <= 0) return Status::Ok();
  const int64_t n = static_cast<int64_t>(prompt_tokens);
  if (n >= c)
    return OutOfRange("[generate] the prompt is " + std::to_string(n) + " tokens; the context holds " +
                      std::to_string(c) + " (-c/--ctx-size)");
  *max_tokens = static_cast<int>(std::min<int64_t>(*max_tokens, c - n));
  return Status::Ok();
}

Status RunBatch(const GenerateFlags& f, ModelBundle& bundle, Engine& engine, const PromptJob& defaults) {
  G4_ASSIGN_OR_RETURN(std::string text, ReadFileToString(f.prompts_file));
  std::vector<PromptJob> jobs;
  std::istringstream in(text);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines separate nothing
    G4_ASSIGN_OR_RETURN(PromptJob job, ParsePromptLine(line, defaults, n));
    jobs.push_back(std::move(job));
  }
  std::vector<std::unique_ptr<TextSink>> sinks;
  std::vector<int> prompt_tokens;
  std::vector<uint64_t> seeds;
  for (PromptJob& job : jobs) {
    G4_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PromptIds(bundle, job));
    G4_RETURN_IF_ERROR(FitContext(f.ctx, bundle, ids.size(), &job.max_tokens));
    if (!job.sampling.seed) job.sampling.seed = RandomSeed();
    seeds.push_back(*job.sampling.seed);
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
    j["seed"] = seeds[i];
    if (!sinks[i]->status().ok()) j["error"] = sinks[i]->status().ToString();
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::fflush(stdout);
  const SchedulerStats st = engine.scheduler().stats();
  if (!f.common.quiet)
    std::fprintf(stderr, "[g4] %zu prompts | %lld steps, %lld tokens run, %lld sampled | %.2f s in the model\n",
                 jobs.size(), static_cast<long long>(st.steps), static_cast<long long>(st.rows),
                 static_cast<long long>(st.sampled), st.forward_seconds);
  return Status::Ok();
}

}  // namespace g4::cli
