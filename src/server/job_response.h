// Running a request's jobs from a handler thread: admission (429 when the
// queue is full, 503 while shutting down), posting to the step loop, waiting
// until the scheduler accepted each job (so a refusal is still a 4xx), then
// streaming what the jobs produce into the HTTP response.
//
// Responses are written with chunked transfer encoding, streams and whole
// bodies alike: a whole body is written once the jobs are done, and in the
// meantime the connection is checked, so a client that goes away cancels its
// jobs (Scheduler::Cancel frees their blocks) whether it streamed or not.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/job.h"
#include "server/requests.h"
#include "server/server_context.h"

namespace httplib {
struct Response;
}

namespace g4::server {

struct PostedJobs {
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<JobUpdate> first;  // what each job had produced when it was accepted
};

// Posts one job per spec and waits for all to be accepted; on any refusal
// the others are cancelled and the error is returned.
std::optional<ApiError> PostAndAwait(ServerContext& ctx, std::vector<JobSpec> specs, PostedJobs* out);

// The one job of a chat request (OpenAI chat completions, Anthropic
// messages): its prompt rendered and tokenized, its spec made against the
// serving limits, then PostAndAwait. `prompt_tokens` receives the prompt's
// length.
std::optional<ApiError> PostChatJob(ServerContext& ctx, const ChatRequest& request, PostedJobs* out,
                                    int* prompt_tokens);

// Text to write for an update of job `index` (deltas), and after the last.
using UpdateFn = std::function<std::string(size_t index, const JobUpdate& update)>;
using EndFn = std::function<std::string()>;

// Sets `res` to stream the jobs' output: `on_update` for every update (the
// accepted ones first), `on_end` once all are done. The callbacks run on the
// handler thread, one at a time.
void ProvideJobResponse(httplib::Response& res, const std::string& content_type, PostedJobs posted,
                        UpdateFn on_update, EndFn on_end);

}  // namespace g4::server
