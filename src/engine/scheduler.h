// Scheduler: runs many sequences through one model, one step at a time
// (continuous batching). Each step has a token budget: every sequence that
// is decoding contributes its one row first, then prompt chunks of the
// others fill what is left. Sequences join and leave at any step, are
// admitted only when the KV pool can reserve all the blocks they may need
// (so a running sequence never runs out), change KV precision at their own
// boundary (KvPool::max_append_tokens), and free their blocks the moment
// they finish or are cancelled.
//
// A sequence's results do not depend on what else runs (row-invariant ops,
// per-sequence attention, per-row sampling keyed by (seed, step)): greedy
// text is the same alone or in any batch.
//
// Threading: Submit and Cancel may be called from any thread; Step (and so
// every SequenceSink callback) runs on the one thread that drives the
// scheduler.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend/sampler.h"
#include "core/status.h"
#include "kv/kv_pool.h"
#include "model/activations.h"
#include "model/gemma4_model.h"
#include "model/step_batch.h"

namespace g4 {

enum class FinishReason { kStop, kLength, kDone, kCancelled, kError };
// "stop", "length", "done", "cancelled", "error"
const char* FinishReasonName(FinishReason reason);

// Where a sequence's results go. Called on the stepping thread.
class SequenceSink {
 public:
  virtual ~SequenceSink() = default;
  // The logits row computed at token `index` of the request (prompt, then
  // forced, then sampled tokens, counted from 0), for index >= logits_from.
  virtual void OnLogits(int64_t index, std::span<const float> logits) {}
  // A sampled token that is not a stop id. Return false to end the
  // sequence here (e.g. a stop string matched); it then finishes kStop.
  virtual bool OnToken(int32_t token, const LogProbs* logprobs) { return true; }
  // Exactly once, last. `seq` holds the sequence's KV (every token run) for
  // reuse, except after cancellation or an error (then it is invalid and
  // the blocks are already free).
  virtual void OnFinish(FinishReason reason, KvSeq seq, const Status& status) = 0;
};

struct SequenceRequest {
  KvSeq seq;                    // continue this sequence (a cached prefix), or invalid: a new one
  std::vector<int32_t> prompt;  // run after what seq holds
  std::vector<int32_t> forced;  // then fed one per step (teacher forcing)
  int max_new_tokens = 0;       // then sampled; 0: finish (kDone) once prompt and forced have run
  SamplingParams sampling;      // an unset seed is drawn at Submit
  std::vector<int32_t> history; // tokens before `prompt` the penalties may look at (earlier turns)
  std::vector<int32_t> stop_ids;
  int64_t logits_from = -1;     // OnLogits for token index >= this; -1: none
  int top_logprobs = -1;        // >= 0: OnToken gets log-probabilities with this many alternatives
  SequenceSink* sink = nullptr; // required; must outlive the sequence
};

struct SchedulerOptions {
  int64_t max_step_tokens = 512;  // rows per step
  int max_seqs = 64;              // sequences per step (and running at once)
  int64_t max_outputs = 0;        // logits rows per step; 0: max_seqs
  int max_queued = 1 << 20;       // waiting sequences; Submit refuses past this
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t rows = 0;          // tokens run
  int64_t sampled = 0;       // tokens sampled
  int64_t widest_step = 0;   // most rows in one step
  int64_t most_seqs = 0;     // most sequences in one step
  int running = 0;
  int waiting = 0;
  double forward_seconds = 0;
};

using RequestId = int64_t;

class Scheduler {
 public:
  // `model` and `pool` must outlive the scheduler.
  static StatusOr<std::unique_ptr<Scheduler>> Create(Gemma4Model& model, KvPool& pool,
                                                     const SchedulerOptions& options);
  // The step buffers' limits a scheduler with these options allocates
  // (the engine sizes its default KV pool around them).
  static ActivationLimits ActivationLimitsFor(const SchedulerOptions& options);
  ~Scheduler();

  // Queues a sequence. InvalidArgument for a bad request (ids outside the
  // vocabulary, no tokens to run, bad sampling parameters, missing sink),
  // ResourceExhausted when it could never fit in the pool or the queue is
  // full; the sink is not called then.
  StatusOr<RequestId> Submit(SequenceRequest request);
  // Ends a sequence at the next step boundary (kCancelled). Unknown or
  // finished ids are ignored.
  void Cancel(RequestId id);

  // Admits what fits, runs one step, delivers results. Ok with nothing to
  // do when idle. An error is a bug or a device failure; the sequences of
  // the failed step are finished with kError.
  Status Step();
  // Steps until every submitted sequence has finished.
  Status RunUntilIdle();
  bool HasWork() const;
  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Sequence;
  Scheduler(Gemma4Model& model, KvPool& pool, const SchedulerOptions& options);
  void TakeInbox();
  void Admit();
  void Finish(Sequence& s, FinishReason reason, const Status& status);
  Status BuildStep(std::vector<Sequence*>& in_step);
  Status Sample(const std::vector<Sequence*>& in_step);
  void Deliver(const std::vector<Sequence*>& in_step);

  Gemma4Model& model_;
  KvPool& pool_;
  SchedulerOptions options_;
  Activations act_;
  StepBatch step_;
  struct Buffers;
  std::unique_ptr<Buffers> buf_;

  // Stepping thread only.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  SchedulerStats stats_;

  mutable std::mutex inbox_mu_;  // guards the three below
  std::vector<std::unique_ptr<Sequence>> inbox_;
  std::vector<RequestId> cancels_;
  RequestId next_id_ = 1;
  int64_t queued_ = 0;  // submitted and not finished
};

}  // namespace g4
