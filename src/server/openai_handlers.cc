#include <httplib.h>

#include "server/handlers.h"
#include "server/job_response.h"
#include "server/openai_request.h"
#include "server/openai_writer.h"

namespace g4::server {

void RespondError(httplib::Response& res, const ApiError& error, ApiFlavor flavor) {
  res.status = error.http_status;
  res.set_content(ErrorBody(error, flavor), "application/json");
}

namespace {

void FailOpenAi(httplib::Response& res, const Status& s) {
  RespondError(res, ApiError::FromStatus(s), ApiFlavor::kOpenAi);
}

}  // namespace

void HandleChatCompletions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return FailOpenAi(res, body.status());
  auto request = ParseChatCompletionRequest(*body, ctx.options.request_limits);
  if (!request.ok()) return FailOpenAi(res, request.status());
  PostedJobs posted;
  int prompt_tokens = 0;
  if (auto err = PostChatJob(ctx, *request, &posted, &prompt_tokens)) return RespondError(res, *err, ApiFlavor::kOpenAi);

  const GenerationRequest& g = request->gen;
  const int n = g.n;
  const bool tools = !request->tools.empty();
  struct State {
    ChatWriter writer;
    std::vector<OutputParser> parsers;
    std::vector<bool> finished;
    Usage usage;
  };
  auto st = std::make_shared<State>(State{ChatWriter(*ctx.bundle.tokenizer, ctx.options.model_id, n, g.stream,
                                                     g.include_usage, g.logprobs),
                                          std::vector<OutputParser>(n, OutputParser(tools)),
                                          std::vector<bool>(n, false),
                                          {}});
  st->usage.prompt_tokens = prompt_tokens;
  st->usage.cached_tokens = posted.first[0].cached_tokens;
  std::string start = st->writer.Start();
  auto on_update = [st, start](size_t, const JobUpdate& u) mutable {
    std::string out = std::move(start);
    start.clear();
    for (size_t i = 0; i < u.choices.size(); ++i) {
      const ChoiceUpdate& c = u.choices[i];
      if (st->finished[i]) continue;
      out += st->writer.Events(static_cast<int>(i), st->parsers[i].Push(c.text), c.logprobs);
      if (!c.finished) continue;
      st->finished[i] = true;
      st->usage.completion_tokens += c.completion_tokens;
      if (c.finish_reason == "error") {
        out += st->writer.StreamError(c.error.message());
        continue;
      }
      out += st->writer.Events(static_cast<int>(i), st->parsers[i].Finish(), {});
      out += st->writer.Finish(static_cast<int>(i), c.finish_reason == "length" ? "length" : "stop");
    }
    return out;
  };
  auto on_end = [st] { return st->writer.End(st->usage); };
  ProvideJobResponse(res, g.stream ? "text/event-stream" : "application/json", std::move(posted),
                     std::move(on_update), std::move(on_end));
}

void HandleCompletions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return FailOpenAi(res, body.status());
  auto request = ParseCompletionRequest(*body, ctx.options.request_limits);
  if (!request.ok()) return FailOpenAi(res, request.status());
  const GenerationRequest& g = request->gen;
  std::vector<JobSpec> specs;
  std::vector<std::string> echoes;
  int prompt_tokens = 0;
  for (const CompletionPrompt& p : request->prompts) {
    auto ids = CompletionPromptIds(p, ctx.bundle);
    if (!ids.ok()) return FailOpenAi(res, ids.status());
    prompt_tokens += static_cast<int>(ids->size());
    if (request->echo) echoes.push_back(p.is_ids ? ctx.bundle.tokenizer->Decode(*ids) : p.text);
    auto spec = MakeJobSpec(g, std::move(ids).value(), ctx.bundle.RawStopIds(), ctx.bundle, ctx.options.limits);
    if (!spec.ok()) return FailOpenAi(res, spec.status());
    specs.push_back(std::move(spec).value());
  }
  PostedJobs posted;
  if (auto err = PostAndAwait(ctx, std::move(specs), &posted)) return RespondError(res, *err, ApiFlavor::kOpenAi);
  const int n = g.n;
  struct State {
    CompletionWriter writer;
    std::vector<bool> finished;
    std::vector<bool> echoed;
    Usage usage;
  };
  const int total = n * static_cast<int>(posted.jobs.size());
  auto st = std::make_shared<State>(State{CompletionWriter(*ctx.bundle.tokenizer, ctx.options.model_id, total,
                                                           g.stream, g.include_usage, g.logprobs),
                                          std::vector<bool>(total, false), std::vector<bool>(total, false), {}});
  st->usage.prompt_tokens = prompt_tokens;
  for (const JobUpdate& f : posted.first) st->usage.cached_tokens += f.cached_tokens;
  auto on_update = [st, n, echoes](size_t job, const JobUpdate& u) {
    std::string out;
    for (size_t c = 0; c < u.choices.size(); ++c) {
      const int i = static_cast<int>(job) * n + static_cast<int>(c);
      const ChoiceUpdate& cu = u.choices[c];
      if (st->finished[i]) continue;
      if (!echoes.empty() && !st->echoed[i]) {
        st->echoed[i] = true;
        out += st->writer.Text(i, echoes[job], {}, {});
      }
      out += st->writer.Text(i, cu.text, cu.tokens, cu.logprobs);
      if (!cu.finished) continue;
      st->finished[i] = true;
      st->usage.completion_tokens += cu.completion_tokens;
      if (cu.finish_reason == "error") {
        out += st->writer.StreamError(cu.error.message());
        continue;
      }
      out += st->writer.Finish(i, cu.finish_reason == "length" ? "length" : "stop");
    }
    return out;
  };
  auto on_end = [st] { return st->writer.End(st->usage); };
  ProvideJobResponse(res, g.stream ? "text/event-stream" : "application/json", std::move(posted),
                     std::move(on_update), std::move(on_end));
}

void HandleModels(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  Json model = {{"id", ctx.options.model_id}, {"object", "model"}, {"created", ctx.created}, {"owned_by", "g4"}};
  if (ctx.options.limits.context > 0) model["max_model_len"] = ctx.options.limits.context;
  res.set_content(Dump({{"object", "list"}, {"data", Json::array({model})}}), "application/json");
}

void HandleModel(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
  if (id != ctx.options.model_id)
    return RespondError(res, {404, "the model '" + id + "' does not exist; this server has '" + ctx.options.model_id + "'", "model"},
                        ApiFlavor::kOpenAi);
  res.set_content(
      Dump({{"id", ctx.options.model_id}, {"object", "model"}, {"created", ctx.created}, {"owned_by", "g4"}}),
      "application/json");
}

}  // namespace g4::server
