#include "server/job_response.h"

#include "server/prompt_builder.h"

#include <httplib.h>

#include <chrono>

namespace g4::server {

std::optional<ApiError> PostChatJob(ServerContext& ctx, const ChatRequest& request, PostedJobs* out,
                                    int* prompt_tokens) {
  auto prompt = ChatPromptIds(request, ctx.bundle);
  if (!prompt.ok()) return ApiError::FromStatus(prompt.status());
  *prompt_tokens = static_cast<int>(prompt->size());
  auto spec = MakeJobSpec(request.gen, std::move(prompt).value(), ChatStopIds(request, ctx.bundle), ctx.bundle,
                          ctx.options.limits);
  if (!spec.ok()) return ApiError::FromStatus(spec.status());
  std::vector<JobSpec> specs;
  specs.push_back(std::move(spec).value());
  return PostAndAwait(ctx, std::move(specs), out);
}

std::optional<ApiError> PostAndAwait(ServerContext& ctx, std::vector<JobSpec> specs, PostedJobs* out) {
  if (ctx.loop.draining()) return ApiError{503, "the server is shutting down", ""};
  const int64_t capacity = ctx.max_seqs + ctx.options.max_queue;
  if (ctx.loop.in_flight() + static_cast<int64_t>(specs.size()) > capacity)
    return ApiError{429,
                    "too many requests: " + std::to_string(ctx.loop.in_flight()) + " running or queued (limit " +
                        std::to_string(capacity) + "); retry later",
                    ""};
  for (JobSpec& spec : specs) {
    auto job = std::make_shared<Job>(std::move(spec), *ctx.bundle.tokenizer, &ctx.metrics);
    if (!ctx.loop.Post(job)) {
      for (auto& j : out->jobs) j->RequestCancel();
      return ApiError{503, "the server is shutting down", ""};
    }
    out->jobs.push_back(std::move(job));
  }
  out->first.resize(out->jobs.size());
  for (size_t i = 0; i < out->jobs.size(); ++i) {
    JobUpdate& u = out->first[i];
    while (!u.accepted && u.rejected.ok()) out->jobs[i]->Wait(std::chrono::milliseconds(100), &u);
    if (!u.rejected.ok()) {
      for (auto& j : out->jobs) j->RequestCancel();
      return ApiError::FromStatus(u.rejected);
    }
  }
  return std::nullopt;
}

namespace {

struct StreamState {
  PostedJobs posted;
  UpdateFn on_update;
  EndFn on_end;
  void CancelAll() {
    for (auto& j : posted.jobs) j->RequestCancel();
  }
};

}  // namespace

void ProvideJobResponse(httplib::Response& res, const std::string& content_type, PostedJobs posted,
                        UpdateFn on_update, EndFn on_end) {
  auto state = std::make_shared<StreamState>(StreamState{std::move(posted), std::move(on_update), std::move(on_end)});
  if (content_type == "text/event-stream") {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
  }
  res.set_chunked_content_provider(
      content_type,
      [state](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
        const size_t n = state->posted.jobs.size();
        std::vector<bool> done(n, false);
        size_t left = n;
        for (size_t i = 0; i < n; ++i) {
          if (!write(state->on_update(i, state->posted.first[i]))) {
            state->CancelAll();
            return false;
          }
          if (state->posted.first[i].done) {
            done[i] = true;
            --left;
          }
        }
        using Clock = std::chrono::steady_clock;
        auto checked = Clock::now();
        const auto wait = std::chrono::milliseconds(n == 1 ? 100 : 10);
        while (left > 0) {
          for (size_t i = 0; i < n; ++i) {
            if (done[i]) continue;
            JobUpdate u;
            if (!state->posted.jobs[i]->Wait(wait, &u)) continue;
            if (!write(state->on_update(i, u))) {
              state->CancelAll();
              return false;
            }
            if (u.done) {
              done[i] = true;
              --left;
            }
          }
          if (left > 0 && Clock::now() - checked > std::chrono::milliseconds(100)) {
            if (!sink.is_writable()) {  // the client went away
              state->CancelAll();
              return false;
            }
            checked = Clock::now();
          }
        }
        if (!write(state->on_end())) return false;
        sink.done();
        return true;
      },
      [state](bool success) {
        if (!success) state->CancelAll();
      });
}

}  // namespace g4::server
