#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <unordered_set>

#include "backend/ops.h"

namespace g4 {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kDone: return "done";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "?";
}

struct Scheduler::Sequence {
  RequestId id = 0;
  SequenceRequest req;
  KvSeq seq;
  std::vector<int32_t> tokens;   // prompt, then forced, then sampled
  std::vector<int32_t> history;  // penalty context: req.history + tokens
  int64_t prompt_len = 0;
  int64_t forced_end = 0;        // prompt_len + forced.size()
  int64_t run = 0;               // tokens already in the KV
  int64_t sampled = 0;
  bool cancelled = false;
  bool finished = false;
  std::unordered_set<int32_t> stops;
  // This step.
  int64_t step_rows = 0;
  int64_t first_output = 0;  // index in the step's output rows
  int64_t num_outputs = 0;
  int64_t output_token0 = 0; // token index of the first output row
  bool samples = false;
  int64_t sample_slot = -1;

  // Tokens ready to run now: the rest of the prompt, or one forced or
  // sampled token.
  int64_t Ready() const {
    if (run < prompt_len) return prompt_len - run;
    return static_cast<int64_t>(tokens.size()) - run > 0 ? 1 : 0;
  }
  bool decoding() const { return run >= prompt_len; }
  // After running through token index `last`, is the next token sampled?
  bool SamplesAfter(int64_t last) const {
    return last + 1 >= forced_end && last + 1 == static_cast<int64_t>(tokens.size()) &&
           sampled < req.max_new_tokens;
  }
};

// Device buffers for sampling, grown when a step needs more (never inside
// a fixed-shape decode loop once warm).
struct Scheduler::Buffers {
  DeviceBuffer params, out_ids, lp_ids, lp_values, bias_ids, bias_values, exempt, history, gather_rows, gathered;
  std::vector<SampleRowParams> host_params;
  std::vector<int32_t> host_bias_ids, host_exempt, host_history, host_gather, host_out;
  std::vector<float> host_bias_values, host_logits, host_lp_values;
  std::vector<int32_t> host_lp_ids;
};

namespace {

Status Grow(Backend& b, DeviceBuffer& buf, size_t bytes, const char* what) {
  if (buf.bytes() >= bytes && buf.data()) return Status::Ok();
  G4_ASSIGN_OR_RETURN(buf, b.Allocate(std::max<size_t>(bytes, 256), what));
  return Status::Ok();
}

// How many trailing history tokens the penalties can see (0 when none is
// active); `all` when a window is unlimited.
int64_t PenaltyWindow(const SamplingParams& p, int64_t all) {
  int64_t w = 0;
  auto take = [&](bool active, int ctx) {
    if (active) w = std::max<int64_t>(w, ctx <= 0 ? all : ctx);
  };
  take(p.repetition_penalty != 1.0f, p.repetition_context_size);
  take(p.presence_penalty != 0.0f, p.presence_context_size);
  take(p.frequency_penalty != 0.0f, p.frequency_context_size);
  return std::min(w, all);
}

}  // namespace

Scheduler::Scheduler(Gemma4Model& model, KvPool& pool, const SchedulerOptions& options)
    : model_(model), pool_(pool), options_(options), buf_(std::make_unique<Buffers>()) {}

Scheduler::~Scheduler() = default;

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(Gemma4Model& model, KvPool& pool,
                                                       const SchedulerOptions& options) {
  if (options.max_step_tokens <= 0 || options.max_seqs <= 0)
    return InvalidArgument("[scheduler] step tokens and sequences must be positive");
  auto s = std::unique_ptr<Scheduler>(new Scheduler(model, pool, options));
  if (s->options_.max_outputs <= 0) s->options_.max_outputs = options.max_seqs;
  G4_ASSIGN_OR_RETURN(s->act_, Activations::Create(model.config(), model.backend(), ActivationLimitsFor(options),
                                                   pool.block_size()));
  return s;
}

ActivationLimits Scheduler::ActivationLimitsFor(const SchedulerOptions& options) {
  ActivationLimits limits;
  limits.max_rows = options.max_step_tokens;
  limits.max_seqs = options.max_seqs;
  limits.max_outputs = options.max_outputs > 0 ? options.max_outputs : options.max_seqs;
  return limits;
}

StatusOr<RequestId> Scheduler::Submit(SequenceRequest request) {
  const int V = model_.vocab_size();
  if (!request.sink) return InvalidArgument("[scheduler] a request needs a sink");
  if (request.prompt.empty() && request.forced.empty())
    return InvalidArgument("[scheduler] a request needs at least one token to run");
  if (request.max_new_tokens < 0) return InvalidArgument("[scheduler] max_new_tokens must be >= 0");
  for (const auto* list : {&request.prompt, &request.forced, &request.history})
    for (int32_t id : *list)
      if (id < 0 || id >= V)
        return InvalidArgument("[scheduler] token id " + std::to_string(id) + " is outside the vocabulary (size " +
                               std::to_string(V) + ")");
  G4_RETURN_IF_ERROR(ValidateSamplingParams(request.sampling, V));
  if (!request.sampling.seed) request.sampling.seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^
                                                      std::random_device{}();
  auto s = std::make_unique<Sequence>();
  s->seq = request.seq.valid() ? std::move(request.seq) : pool_.NewSequence();
  const int64_t held = s->seq.length();
  const int64_t total = held + static_cast<int64_t>(request.prompt.size() + request.forced.size()) +
                        request.max_new_tokens;
  if (total > model_.config().max_position_embeddings && model_.config().max_position_embeddings > 0)
    return InvalidArgument("[scheduler] " + std::to_string(total) + " tokens exceed the model's context of " +
                           std::to_string(model_.config().max_position_embeddings));
  if (!pool_.CouldEverFit(total, options_.max_step_tokens))
    return ResourceExhausted("[scheduler] a sequence of " + std::to_string(total) +
                             " tokens can never fit in the KV pool");
  s->tokens = request.prompt;
  s->tokens.insert(s->tokens.end(), request.forced.begin(), request.forced.end());
  s->prompt_len = static_cast<int64_t>(request.prompt.size());
  s->forced_end = static_cast<int64_t>(s->tokens.size());
  s->history = request.history;
  s->history.insert(s->history.end(), s->tokens.begin(), s->tokens.begin() + s->prompt_len);
  s->stops.insert(request.stop_ids.begin(), request.stop_ids.end());
  s->req = std::move(request);
  std::lock_guard<std::mutex> lock(inbox_mu_);
  if (queued_ >= options_.max_queued) return ResourceExhausted("[scheduler] the queue is full");
  s->id = next_id_++;
  ++queued_;
  const RequestId id = s->id;
  inbox_.push_back(std::move(s));
  return id;
}

void Scheduler::Cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  cancels_.push_back(id);
}

bool Scheduler::HasWork() const {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  return queued_ > 0;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.running = static_cast<int>(running_.size());
  s.waiting = static_cast<int>(waiting_.size());
  return s;
}

void Scheduler::Finish(Sequence& s, FinishReason reason, const Status& status) {
  if (s.finished) return;
  s.finished = true;
  KvSeq seq;
  if (reason == FinishReason::kCancelled || reason == FinishReason::kError) {
    s.seq = KvSeq();  // frees the blocks now
  } else {
    seq = std::move(s.seq);
  }
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    --queued_;
  }
  s.req.sink->OnFinish(reason, std::move(seq), status);
}

void Scheduler::TakeInbox() {
  std::vector<std::unique_ptr<Sequence>> inbox;
  std::vector<RequestId> cancels;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& s : inbox) waiting_.push_back(std::move(s));
  if (cancels.empty()) return;
  std::unordered_set<RequestId> ids(cancels.begin(), cancels.end());
  for (auto& s : running_)
    if (ids.count(s->id)) Finish(*s, FinishReason::kCancelled, Status::Ok());
  for (auto& s : waiting_)
    if (ids.count(s->id)) Finish(*s, FinishReason::kCancelled, Status::Ok());
}

void Scheduler::Admit() {
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_seqs) {
    Sequence& s = *waiting_.front();
    if (s.finished) {
      waiting_.pop_front();
      continue;
    }
    const int64_t total = s.seq.length() + static_cast<int64_t>(s.tokens.size()) + s.req.max_new_tokens;
    if (!pool_.Reserve(s.seq, total, options_.max_step_tokens).ok()) break;  // FIFO: wait for blocks
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

Status Scheduler::BuildStep(std::vector<Sequence*>& in_step) {
  step_.Clear();
  int64_t budget = options_.max_step_tokens, outputs = 0;
  const int64_t max_outputs = options_.max_outputs;
  auto add = [&](Sequence& s, int64_t n) -> Status {
    // Output rows: those at or past logits_from, and the last one when the
    // next token is sampled from it.
    const int64_t last = s.run + n - 1;
    int64_t first = n;
    if (s.req.logits_from >= 0 && last >= s.req.logits_from) first = std::max<int64_t>(0, s.req.logits_from - s.run);
    s.samples = s.SamplesAfter(last);
    if (s.samples) first = std::min(first, n - 1);
    G4_RETURN_IF_ERROR(pool_.PrepareAppend(s.seq, n));
    s.step_rows = n;
    s.num_outputs = n - first;
    s.output_token0 = s.run + first;
    s.first_output = step_.Add(s.seq, std::span<const int32_t>(s.tokens).subspan(s.run, n), first);
    budget -= n;
    outputs += s.num_outputs;
    in_step.push_back(&s);
    return Status::Ok();
  };
  auto ready = [&](Sequence& s) -> StatusOr<int64_t> {
    if (s.finished) return int64_t{0};
    if (pool_.max_append_tokens(s.seq) == 0) G4_RETURN_IF_ERROR(pool_.Maintain(s.seq));
    return std::min(s.Ready(), pool_.max_append_tokens(s.seq));
  };
  // Decode rows first: one token each.
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (!s.decoding() || budget < 1 || outputs >= max_outputs) continue;
    G4_ASSIGN_OR_RETURN(int64_t n, ready(s));
    if (n > 0) G4_RETURN_IF_ERROR(add(s, 1));
  }
  // Then prompt chunks, oldest first, in what is left.
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (s.decoding() || budget < 1) continue;
    G4_ASSIGN_OR_RETURN(int64_t n, ready(s));
    n = std::min(n, budget);
    if (s.req.logits_from >= 0) {  // every row from logits_from on is an output
      const int64_t free_rows = max_outputs - outputs;
      const int64_t before = std::max<int64_t>(0, s.req.logits_from - s.run);
      n = std::min(n, before + free_rows);
    }
    if (s.SamplesAfter(s.run + n - 1) && outputs >= max_outputs) n = 0;
    if (n > 0) G4_RETURN_IF_ERROR(add(s, n));
  }
  return Status::Ok();
}

Status Scheduler::Sample(const std::vector<Sequence*>& in_step) {
  Backend& b = model_.backend();
  Buffers& B = *buf_;
  const int V = model_.vocab_size();
  B.host_params.clear();
  B.host_bias_ids.clear();
  B.host_bias_values.clear();
  B.host_exempt.clear();
  B.host_history.clear();
  B.host_gather.clear();
  int top = -1;
  for (Sequence* s : in_step) {
    if (!s->samples) continue;
    const SamplingParams& p = s->req.sampling;
    SampleRowParams r;
    CopyScalarParams(p, &r);
    r.bias_begin = static_cast<int32_t>(B.host_bias_ids.size());
    for (const auto& [id, bias] : p.logit_bias) {
      B.host_bias_ids.push_back(id);
      B.host_bias_values.push_back(bias);
    }
    r.bias_count = static_cast<int32_t>(B.host_bias_ids.size()) - r.bias_begin;
    r.exempt_begin = static_cast<int32_t>(B.host_exempt.size());
    B.host_exempt.insert(B.host_exempt.end(), p.xtc_exempt_tokens.begin(), p.xtc_exempt_tokens.end());
    r.exempt_count = static_cast<int32_t>(B.host_exempt.size()) - r.exempt_begin;
    const int64_t window = PenaltyWindow(p, static_cast<int64_t>(s->history.size()));
    r.history_begin = static_cast<int32_t>(B.host_history.size());
    B.host_history.insert(B.host_history.end(), s->history.end() - window, s->history.end());
    r.history_count = static_cast<int32_t>(window);
    r.seed = *p.seed;
    r.step = static_cast<uint64_t>(s->sampled);
    s->sample_slot = static_cast<int64_t>(B.host_params.size());
    B.host_params.push_back(r);
    B.host_gather.push_back(static_cast<int32_t>(s->first_output + s->num_outputs - 1));
    top = std::max(top, s->req.top_logprobs);
  }
  const int64_t n = static_cast<int64_t>(B.host_params.size());
  if (n == 0) return Status::Ok();

  auto upload = [&](DeviceBuffer& dst, const void* src, size_t bytes, const char* what) -> Status {
    G4_RETURN_IF_ERROR(Grow(b, dst, bytes, what));
    if (bytes) b.CopyToDevice(dst.data(), src, bytes);
    return Status::Ok();
  };
  G4_RETURN_IF_ERROR(upload(B.params, B.host_params.data(), n * sizeof(SampleRowParams), "sampling"));
  G4_RETURN_IF_ERROR(upload(B.bias_ids, B.host_bias_ids.data(), B.host_bias_ids.size() * 4, "sampling"));
  G4_RETURN_IF_ERROR(upload(B.bias_values, B.host_bias_values.data(), B.host_bias_values.size() * 4, "sampling"));
  G4_RETURN_IF_ERROR(upload(B.exempt, B.host_exempt.data(), B.host_exempt.size() * 4, "sampling"));
  G4_RETURN_IF_ERROR(upload(B.history, B.host_history.data(), B.host_history.size() * 4, "sampling"));
  G4_RETURN_IF_ERROR(Grow(b, B.out_ids, n * sizeof(int32_t), "sampling"));

  // The rows to sample: the output rows themselves when every output row
  // samples, else a gathered copy.
  const TensorView all_logits = Activations::Flat(act_.logits, step_.num_outputs(), V);
  TensorView logits = all_logits;
  if (n != step_.num_outputs()) {
    G4_RETURN_IF_ERROR(upload(B.gather_rows, B.host_gather.data(), n * sizeof(int32_t), "sampling"));
    G4_RETURN_IF_ERROR(Grow(b, B.gathered, n * V * sizeof(float), "sampling"));
    logits = TensorView::F32(B.gathered.as<float>(), n, V, b.space());
    b.ops().GatherRows(all_logits, B.gather_rows.as<int32_t>(), logits);
  }
  SampleArgs args;
  args.logits = logits;
  args.params = B.params.as<SampleRowParams>();
  args.host_params = B.host_params;
  args.bias_ids = B.bias_ids.as<int32_t>();
  args.bias_values = B.bias_values.as<float>();
  args.exempt_ids = B.exempt.as<int32_t>();
  args.history = B.history.as<int32_t>();
  args.out_ids = TensorView::I32(B.out_ids.as<int32_t>(), n, 1, b.space());
  if (top >= 0) {
    G4_RETURN_IF_ERROR(Grow(b, B.lp_ids, n * (1 + top) * sizeof(int32_t), "sampling"));
    G4_RETURN_IF_ERROR(Grow(b, B.lp_values, n * (1 + top) * sizeof(float), "sampling"));
    args.top_logprobs = top;
    args.logprob_ids = TensorView::I32(B.lp_ids.as<int32_t>(), n, 1 + top, b.space());
    args.logprob_values = TensorView::F32(B.lp_values.as<float>(), n, 1 + top, b.space());
  }
  b.ops().SampleRows(args);
  B.host_out.resize(n);
  b.CopyToHost(B.host_out.data(), B.out_ids.data(), n * sizeof(int32_t));
  if (top >= 0) {
    B.host_lp_ids.resize(n * (1 + top));
    B.host_lp_values.resize(n * (1 + top));
    b.CopyToHost(B.host_lp_ids.data(), B.lp_ids.data(), B.host_lp_ids.size() * sizeof(int32_t));
    b.CopyToHost(B.host_lp_values.data(), B.lp_values.data(), B.host_lp_values.size() * sizeof(float));
  }
  return Status::Ok();
}

void Scheduler::Deliver(const std::vector<Sequence*>& in_step) {
  const int V = model_.vocab_size();
  Buffers& B = *buf_;
  const int top = B.host_lp_ids.empty() ? -1 : static_cast<int>(B.host_lp_ids.size() / B.host_out.size()) - 1;
  for (Sequence* s : in_step) {
    pool_.Commit(s->seq, s->step_rows);
    s->run += s->step_rows;
    stats_.rows += s->step_rows;
    if (s->req.logits_from >= 0 && !B.host_logits.empty()) {
      for (int64_t i = 0; i < s->num_outputs; ++i) {
        const int64_t index = s->output_token0 + i;
        if (index < s->req.logits_from) continue;
        s->req.sink->OnLogits(index, std::span<const float>(&B.host_logits[(s->first_output + i) * V], V));
      }
    }
    if (s->samples) {
      const int32_t token = B.host_out[s->sample_slot];
      if (token == kNonFiniteLogits) {
        Finish(*s, FinishReason::kError,
               Internal("[model] the logits came out non-finite (NaN); the model's weights or numerics are broken"));
        continue;
      }
      ++stats_.sampled;
      if (s->stops.count(token)) {
        Finish(*s, FinishReason::kStop, Status::Ok());
        continue;
      }
      ++s->sampled;
      s->tokens.push_back(token);
      s->history.push_back(token);
      LogProbs lp;
      const LogProbs* lpp = nullptr;
      if (s->req.top_logprobs >= 0 && top >= 0) {
        const int32_t* ids = &B.host_lp_ids[s->sample_slot * (1 + top)];
        const float* values = &B.host_lp_values[s->sample_slot * (1 + top)];
        lp.token = ids[0];
        lp.logprob = values[0];
        for (int j = 0; j < s->req.top_logprobs && j < top; ++j) lp.top.push_back({ids[1 + j], values[1 + j]});
        lpp = &lp;
      }
      if (!s->req.sink->OnToken(token, lpp)) {
        Finish(*s, FinishReason::kStop, Status::Ok());
        continue;
      }
      // The last allowed token is not run: nothing would read its logits.
      if (s->sampled == s->req.max_new_tokens) Finish(*s, FinishReason::kLength, Status::Ok());
      continue;
    }
    if (s->run >= s->forced_end && s->req.max_new_tokens == 0) Finish(*s, FinishReason::kDone, Status::Ok());
  }
}

Status Scheduler::Step() {
  TakeInbox();
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& s) { return s->finished; });
  Admit();
  if (running_.empty()) return Status::Ok();

  std::vector<Sequence*> in_step;
  Status built = BuildStep(in_step);
  auto fail = [&](const Status& st) {
    for (Sequence* s : in_step) Finish(*s, FinishReason::kError, st);
    return st;
  };
  if (!built.ok()) return fail(built);
  if (in_step.empty()) return Status::Ok();
  bool any_logits = false;
  for (Sequence* s : in_step) any_logits |= s->req.logits_from >= 0 && s->num_outputs > 0;
  step_.compute_logits = step_.num_outputs() > 0;

  const auto t0 = std::chrono::steady_clock::now();
  Status st = model_.Forward(step_, pool_, act_);
  if (!st.ok()) return fail(st);
  Backend& b = model_.backend();
  const int V = model_.vocab_size();
  buf_->host_logits.clear();
  if (any_logits) {  // before sampling, which rewrites logits in place
    buf_->host_logits.resize(step_.num_outputs() * V);
    b.CopyToHost(buf_->host_logits.data(), act_.logits.data, buf_->host_logits.size() * sizeof(float));
  }
  buf_->host_lp_ids.clear();
  buf_->host_lp_values.clear();
  st = Sample(in_step);
  if (!st.ok()) return fail(st);
  b.Sync();
  stats_.forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.steps;
  stats_.widest_step = std::max(stats_.widest_step, step_.num_rows());
  stats_.most_seqs = std::max(stats_.most_seqs, step_.num_seqs());
  Deliver(in_step);
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& s) { return s->finished; });
  return Status::Ok();
}

Status Scheduler::RunUntilIdle() {
  while (HasWork()) {
    const int64_t steps = stats_.steps;
    G4_RETURN_IF_ERROR(Step());
    // No step and nobody running: the head of the queue cannot get its
    // blocks (they are held outside the scheduler, e.g. by cached prefixes).
    if (stats_.steps == steps && running_.empty() && !waiting_.empty())
      return ResourceExhausted("[scheduler] the KV pool has no room for the waiting sequence");
  }
  return Status::Ok();
}

}  // namespace g4
