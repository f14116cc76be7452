#include <httplib.h>

#include "server/anthropic_request.h"
#include "server/anthropic_writer.h"
#include "server/handlers.h"
#include "server/job_response.h"

namespace g4::server {
namespace {

void FailAnthropic(httplib::Response& res, const Status& s) {
  RespondError(res, ApiError::FromStatus(s), ApiFlavor::kAnthropic);
}

}  // namespace

void HandleMessages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return FailAnthropic(res, body.status());
  auto request = ParseMessagesRequest(*body, /*count_tokens=*/false, ctx.options.request_limits);
  if (!request.ok()) return FailAnthropic(res, request.status());
  PostedJobs posted;
  int prompt_tokens = 0;
  if (auto err = PostChatJob(ctx, *request, &posted, &prompt_tokens)) return RespondError(res, *err, ApiFlavor::kAnthropic);

  const bool stream = request->gen.stream;
  struct State {
    MessagesWriter writer;
    OutputParser parser;
    bool finished = false;
    std::string tail;  // the non-stream body
  };
  auto st = std::make_shared<State>(State{
      MessagesWriter(ctx.options.model_id, stream, prompt_tokens, posted.first[0].cached_tokens),
      OutputParser(!request->tools.empty()), false, ""});
  std::string start = st->writer.Start();
  auto on_update = [st, start, stream](size_t, const JobUpdate& u) mutable {
    std::string out = std::move(start);
    start.clear();
    if (st->finished || u.choices.empty()) return out;
    const ChoiceUpdate& c = u.choices[0];
    out += st->writer.Events(st->parser.Push(c.text));
    if (!c.finished) return out;
    st->finished = true;
    if (c.finish_reason == "error") {
      if (stream) return out + st->writer.StreamError(c.error.message());
      st->tail = ErrorBody({500, c.error.message(), ""}, ApiFlavor::kAnthropic);
      return out;
    }
    out += st->writer.Events(st->parser.Finish());
    std::string end = st->writer.Finish(c.finish_reason == "length" ? "length" : "stop", c.stop_string,
                                        c.completion_tokens);
    if (!stream) {
      st->tail = std::move(end);
      return out;
    }
    return out + end;
  };
  auto on_end = [st] { return st->tail; };
  ProvideJobResponse(res, stream ? "text/event-stream" : "application/json", std::move(posted),
                     std::move(on_update), std::move(on_end));
}

void HandleCountTokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseObject(req.body);
  if (!body.ok()) return FailAnthropic(res, body.status());
  auto request = ParseMessagesRequest(*body, /*count_tokens=*/true, ctx.options.request_limits);
  if (!request.ok()) return FailAnthropic(res, request.status());
  auto prompt = ChatPromptIds(*request, ctx.bundle);
  if (!prompt.ok()) return FailAnthropic(res, prompt.status());
  res.set_content(Dump({{"input_tokens", prompt->size()}}), "application/json");
}

}  // namespace g4::server
