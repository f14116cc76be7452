// Job: one HTTP request's generation, shared by the handler thread that
// waits on it and the step-loop thread that runs it (step_loop.h).
//
// A job has n choices that share one prompt; each choice is one scheduler
// sequence whose sink (ChoiceSink) turns tokens into text the way TextSink
// does (UTF-8 completed across tokens, stop strings held back and never
// shown) and appends it to the job. The handler thread takes what is new
// with Wait (changes are coalesced: a slow reader gets larger pieces), and
// asks for cancellation with RequestCancel.
//
// Threading: the spec is fixed before the job is posted. Sinks run on the
// stepping thread; Wait, RequestCancel and the accessors are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/sampler.h"
#include "core/status.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace g4::server {

class Metrics;

struct JobSpec {
  std::vector<int32_t> prompt;  // the whole prompt (a cached prefix is found by the loop)
  int n = 1;                    // choices
  SamplingParams sampling;      // a set seed gives choice i the seed + i
  int max_tokens = 256;
  std::vector<int> stop_ids;
  std::vector<std::string> stop_strings;
  int top_logprobs = -1;        // >= 0: per-token log-probabilities with this many alternatives
  bool cache = true;            // look up and store prefixes
};

struct ChoiceUpdate {
  std::string text;                 // new text since the last Wait
  std::vector<int32_t> tokens;      // new token ids
  std::vector<LogProbs> logprobs;   // their log-probabilities (when asked for)
  bool finished = false;            // set once, with the fields below
  std::string finish_reason;        // "stop", "length", "cancelled", "error"
  std::string stop_string;          // the stop string that ended it, if one did
  Status error;                     // when finish_reason is "error"
  int completion_tokens = 0;        // tokens sampled so far (all of them once finished)
};

struct JobUpdate {
  bool accepted = false;     // the scheduler took choice 0
  Status rejected;           // not ok: the job never ran (bad request, can never fit, shutting down)
  int cached_tokens = 0;     // prompt tokens served from the prefix cache (choice 0)
  std::vector<ChoiceUpdate> choices;
  bool done = false;         // every choice has finished
};

class Job {
 public:
  Job(JobSpec spec, const Tokenizer& tokenizer, Metrics* metrics);
  ~Job();

  const JobSpec& spec() const { return spec_; }

  // Waits until something changed or `timeout` passed, then moves what is
  // new into *out (which accumulates: text is appended, flags are set).
  // Returns true when *out changed.
  bool Wait(std::chrono::milliseconds timeout, JobUpdate* out);
  // Asks the loop to cancel the remaining choices (their blocks are freed).
  void RequestCancel();
  bool cancel_requested() const { return cancel_.load(); }
  bool done() const;

  // --- the step loop's side (stepping thread)
  SequenceSink* sink(int choice);
  // The sink of the job's prefill sequence: it runs the prompt's whole
  // blocks alone, so the prefix cache can keep them before the choices
  // fork them (step_loop.h).
  SequenceSink* prefill_sink();
  void SetAccepted(int cached_tokens);
  void SetRejected(const Status& status);
  // Finishes a choice that never reached the scheduler.
  void FinishUnsubmitted(int choice, const std::string& reason, const Status& status);
  // Called by a choice's sink when it finished, with its KV (may be invalid)
  // and the tokens it holds; and by the prefill sink with the prefill's KV.
  std::function<void(KvSeq, std::vector<int32_t>, int choice)> on_finish;
  std::function<void(KvSeq, const Status&)> on_prefill;
  std::vector<RequestId> ids;      // per choice, 0 until submitted
  std::vector<bool> submitted;     // per choice: submitted, or finished without running
  RequestId prefill_id = 0;        // while the prefill runs
  bool prefill_over = false;       // the prefill finished: submit the choices
  bool cancel_sent = false;        // the loop acted on RequestCancel
  bool accepted_by_loop = false;   // SetAccepted was called
  int cached_tokens = 0;           // reused from earlier requests
  int64_t prefill_tokens = 0;      // the prefix the prefill leaves in the cache
  std::chrono::steady_clock::time_point created;

 private:
  class ChoiceSink;
  friend class ChoiceSink;
  class PrefillSink;
  void Notify();

  JobSpec spec_;
  Metrics* metrics_;
  std::vector<std::unique_ptr<ChoiceSink>> sinks_;
  std::unique_ptr<PrefillSink> prefill_sink_;
  std::atomic<bool> cancel_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  JobUpdate pending_;      // guarded by mu_: not yet taken
  bool changed_ = false;   // guarded by mu_
  int finished_ = 0;       // guarded by mu_
};

}  // namespace g4::server
