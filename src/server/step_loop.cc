#include "server/step_loop.h"

#include <algorithm>

namespace g4::server {

StepLoop::StepLoop(Engine& engine, PrefixCache* cache, Metrics& metrics, std::function<void(const std::string&)> log)
    : engine_(engine), cache_(cache), metrics_(metrics), log_(std::move(log)) {}

StepLoop::~StepLoop() { Stop(); }

void StepLoop::Start() {
  Publish();
  thread_ = std::thread([this] { Run(); });
}

void StepLoop::Wake() { cv_.notify_all(); }

bool StepLoop::Post(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_.load() || stop_) return false;
    in_flight_.fetch_add(1);
    inbox_.push_back(std::move(job));
  }
  Wake();
  return true;
}

void StepLoop::BeginDrain() { draining_.store(true); }

void StepLoop::CancelAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_all_ = true;
  }
  Wake();
}

void StepLoop::Stop() {
  draining_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

void StepLoop::StartJob(const std::shared_ptr<Job>& job) {
  Job* j = job.get();
  const JobSpec& spec = j->spec();
  const std::vector<int32_t>& p = spec.prompt;
  const bool caching = cache_ && cache_->enabled() && spec.cache;
  j->on_finish = [this, caching](KvSeq seq, std::vector<int32_t> tokens, int) {
    if (caching && seq.valid()) cache_->Insert(seq, std::move(tokens));
  };
  j->on_prefill = [this, j, caching](KvSeq seq, const Status&) {
    j->prefill_id = 0;
    const auto& prompt = j->spec().prompt;
    if (caching && seq.valid())
      cache_->Insert(seq, std::vector<int32_t>(prompt.begin(), prompt.begin() + j->prefill_tokens));
  };
  // Refuse what can never fit before any work (the prefill alone would fit).
  const int64_t total = static_cast<int64_t>(p.size()) + spec.max_tokens;
  if (!engine_.pool().CouldEverFit(total, engine_.scheduler().options().max_step_tokens)) {
    j->SetRejected(ResourceExhausted("[server] a prompt of " + std::to_string(p.size()) + " tokens plus max_tokens " +
                                     std::to_string(spec.max_tokens) + " can never fit in the KV pool"));
    return;
  }
  PrefixCache::Hit hit;
  if (caching && p.size() > 1) hit = cache_->Lookup(p, static_cast<int64_t>(p.size()) - 1);
  j->cached_tokens = static_cast<int>(hit.tokens);
  // The prompt's whole blocks not cached yet run first as a sequence of
  // their own, which the cache keeps when it finishes; the choices then
  // fork it. (Forking a running sequence instead would leave the blocks it
  // later releases charged to it.)
  const int64_t block = engine_.pool().block_size();
  const int64_t aligned = (static_cast<int64_t>(p.size()) - 1) / block * block;
  if (caching && aligned >= hit.tokens + block) {
    SequenceRequest req;
    req.seq = std::move(hit.seq);
    req.prompt.assign(p.begin() + hit.tokens, p.begin() + aligned);
    req.history.assign(p.begin(), p.begin() + hit.tokens);
    req.sampling.temperature = 0;
    req.sampling.seed = 0;
    req.sink = j->prefill_sink();
    StatusOr<RequestId> id = engine_.scheduler().Submit(std::move(req));
    if (!id.ok()) {
      j->SetRejected(id.status());
      return;
    }
    j->prefill_id = *id;
    j->prefill_tokens = aligned;
    j->SetAccepted(j->cached_tokens);
    metrics_.AddPrompt(static_cast<int64_t>(p.size()), j->cached_tokens);
    deferred_ += spec.n;  // the choices start when the prefill is done
    return;
  }
  if (!SubmitChoice(job, 0, std::move(hit))) return;
  j->SetAccepted(j->cached_tokens);
  metrics_.AddPrompt(static_cast<int64_t>(p.size()), j->cached_tokens);
  for (int i = 1; i < spec.n; ++i) SubmitChoice(job, i, PrefixCache::Hit{});
}

bool StepLoop::SubmitChoice(const std::shared_ptr<Job>& job, int i, PrefixCache::Hit hit) {
  const JobSpec& spec = job->spec();
  job->submitted[i] = true;
  if (!hit.seq.valid() && cache_ && cache_->enabled() && spec.cache && spec.prompt.size() > 1)
    hit = cache_->Lookup(spec.prompt, static_cast<int64_t>(spec.prompt.size()) - 1, /*count=*/false);
  SequenceRequest req;
  req.seq = std::move(hit.seq);
  req.prompt.assign(spec.prompt.begin() + hit.tokens, spec.prompt.end());
  req.history.assign(spec.prompt.begin(), spec.prompt.begin() + hit.tokens);
  req.max_new_tokens = spec.max_tokens;
  req.sampling = spec.sampling;
  if (req.sampling.seed && i > 0) *req.sampling.seed += static_cast<uint64_t>(i);
  req.stop_ids.assign(spec.stop_ids.begin(), spec.stop_ids.end());
  req.top_logprobs = spec.top_logprobs;
  req.sink = job->sink(i);
  StatusOr<RequestId> id = engine_.scheduler().Submit(std::move(req));
  if (!id.ok()) {
    if (!job->accepted_by_loop) {
      job->SetRejected(id.status());
    } else {
      job->FinishUnsubmitted(i, "error", id.status());
    }
    return false;
  }
  job->ids[i] = *id;
  return true;
}

void StepLoop::ReleaseDeferred() {
  if (deferred_ == 0) return;
  for (const auto& job : active_) {
    if (!job->prefill_over) continue;
    for (int i = 0; i < job->spec().n; ++i) {
      if (job->submitted[i]) continue;
      --deferred_;
      if (job->cancel_requested()) {
        job->submitted[i] = true;
        job->FinishUnsubmitted(i, "cancelled", Status::Ok());
      } else {
        SubmitChoice(job, i, PrefixCache::Hit{});
      }
    }
  }
}

void StepLoop::CheckCancels() {
  for (const auto& job : active_) {
    if (!job->cancel_requested() || job->cancel_sent) continue;
    job->cancel_sent = true;
    if (job->prefill_id != 0) engine_.scheduler().Cancel(job->prefill_id);  // its choices end when it does
    for (int i = 0; i < job->spec().n; ++i)
      if (job->ids[i] != 0) engine_.scheduler().Cancel(job->ids[i]);
  }
}

void StepLoop::Publish() {
  EngineSnapshot s;
  KvPool& pool = engine_.pool();
  s.scheduler = engine_.scheduler().stats();
  s.running = s.scheduler.running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.queued = s.scheduler.waiting + deferred_ + static_cast<int>(inbox_.size());
  }
  s.in_flight = in_flight_.load();
  for (int g = 0; g < kNumKvGroups; ++g) {
    for (int st = 0; st < 2; ++st) {
      const KvGroup group = static_cast<KvGroup>(g);
      const int64_t cap = pool.capacity_blocks(group, st);
      if (cap == 0) continue;
      s.kv.push_back({g == 0 ? "full" : "sliding", st, pool.blocks_in_use(group, st), pool.free_blocks(group, st), cap});
    }
  }
  s.kv_used_bytes = pool.used_bytes();
  s.kv_capacity_bytes = pool.capacity_bytes();
  if (cache_) s.cache = cache_->stats();
  metrics_.Publish(std::move(s));
}

void StepLoop::Run() {
  Scheduler& scheduler = engine_.scheduler();
  while (true) {
    std::vector<std::shared_ptr<Job>> fresh;
    bool stop = false, cancel_all = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!stop_ && !cancel_all_ && inbox_.empty() && active_.empty() && !scheduler.HasWork())
        cv_.wait_for(lock, std::chrono::seconds(1));
      fresh.swap(inbox_);
      stop = stop_;
      cancel_all = cancel_all_;
      cancel_all_ = false;
    }
    for (auto& job : fresh) {
      active_.push_back(job);
      StartJob(job);
    }
    if (stop || cancel_all)
      for (const auto& job : active_) job->RequestCancel();
    CheckCancels();
    ReleaseDeferred();
    if (scheduler.HasWork()) {
      Status st = scheduler.Step();
      if (!st.ok() && log_) log_("step failed (its sequences end with an error): " + st.ToString());
      // Admission blocked by blocks that cached prefixes hold: free some.
      const SchedulerStats ss = scheduler.stats();
      if (cache_ && ss.waiting > 0 && ss.running < scheduler.options().max_seqs) cache_->EvictOne();
    } else if (!active_.empty() && deferred_ == 0) {
      // Nothing runs, yet jobs are active: they are finishing; wait briefly
      // instead of spinning.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    const size_t before = active_.size();
    std::erase_if(active_, [](const std::shared_ptr<Job>& j) { return j->done(); });
    in_flight_.fetch_sub(static_cast<int64_t>(before - active_.size()));
    Publish();
    if (stop && active_.empty() && !scheduler.HasWork()) break;
  }
  if (cache_) cache_->Flush();
  Publish();
}

}  // namespace g4::server
