#include "server/job.h"

#include "server/metrics.h"

namespace g4::server {

// One choice's SequenceSink (stepping thread).
class Job::ChoiceSink final : public SequenceSink {
 public:
  ChoiceSink(Job& job, int index, const Tokenizer& tokenizer)
      : job_(job), index_(index), stops_(job.spec_.stop_ids, job.spec_.stop_strings), decoder_(tokenizer) {}

  bool OnToken(int32_t token, const LogProbs* logprobs) override {
    const auto now = std::chrono::steady_clock::now();
    if (job_.metrics_) {
      if (sampled_ == 0) {
        job_.metrics_->ObserveTtft(std::chrono::duration<double>(now - job_.created).count());
      } else {
        job_.metrics_->ObserveItl(std::chrono::duration<double>(now - last_).count());
      }
      job_.metrics_->AddGenerated(1);
    }
    last_ = now;
    ++sampled_;
    tokens_.push_back(token);
    StopMatcher::Step s = stops_.Feed(token, decoder_.Push(token));
    {
      std::lock_guard<std::mutex> lock(job_.mu_);
      ChoiceUpdate& u = job_.pending_.choices[index_];
      u.text += s.text;
      u.tokens.push_back(token);
      if (logprobs) u.logprobs.push_back(*logprobs);
      u.completion_tokens = sampled_;
      if (s.stopped) stop_string_ = s.stop_string;
      job_.changed_ = true;
    }
    job_.Notify();
    return !s.stopped;
  }

  void OnFinish(FinishReason reason, KvSeq seq, const Status& status) override {
    std::string tail;
    if (!stops_.stopped()) tail = stops_.Feed(-1, decoder_.Finish()).text + stops_.Flush();
    if (job_.on_finish) {
      // The KV holds the prompt and the tokens that were run (not a last
      // token that ended generation).
      std::vector<int32_t> held = job_.spec_.prompt;
      held.insert(held.end(), tokens_.begin(), tokens_.end());
      if (seq.valid()) held.resize(std::min<size_t>(held.size(), static_cast<size_t>(seq.length())));
      job_.on_finish(std::move(seq), std::move(held), index_);
    }
    std::string why = FinishReasonName(reason);
    if (reason == FinishReason::kDone) why = "length";  // max_tokens 0
    Finish(why, status, tail);
  }

  void Finish(const std::string& reason, const Status& status, const std::string& tail = "") {
    {
      std::lock_guard<std::mutex> lock(job_.mu_);
      ChoiceUpdate& u = job_.pending_.choices[index_];
      if (u.finished) return;
      u.text += tail;
      u.finished = true;
      u.finish_reason = reason;
      u.stop_string = stop_string_;
      u.error = status;
      u.completion_tokens = sampled_;
      job_.changed_ = true;
      if (++job_.finished_ == job_.spec_.n) job_.pending_.done = true;
    }
    job_.Notify();
  }

 private:
  Job& job_;
  const int index_;
  StopMatcher stops_;
  StreamDecoder decoder_;
  std::vector<int32_t> tokens_;
  std::string stop_string_;
  int sampled_ = 0;
  std::chrono::steady_clock::time_point last_;
};

class Job::PrefillSink final : public SequenceSink {
 public:
  explicit PrefillSink(Job& job) : job_(job) {}
  void OnFinish(FinishReason reason, KvSeq seq, const Status& status) override {
    job_.prefill_over = true;
    if (job_.on_prefill) job_.on_prefill(std::move(seq), status);
  }

 private:
  Job& job_;
};

Job::Job(JobSpec spec, const Tokenizer& tokenizer, Metrics* metrics)
    : created(std::chrono::steady_clock::now()), spec_(std::move(spec)), metrics_(metrics) {
  if (spec_.n < 1) spec_.n = 1;
  pending_.choices.resize(spec_.n);
  ids.assign(spec_.n, 0);
  submitted.assign(spec_.n, false);
  for (int i = 0; i < spec_.n; ++i) sinks_.push_back(std::make_unique<ChoiceSink>(*this, i, tokenizer));
  prefill_sink_ = std::make_unique<PrefillSink>(*this);
}

Job::~Job() = default;

SequenceSink* Job::sink(int choice) { return sinks_[choice].get(); }
SequenceSink* Job::prefill_sink() { return prefill_sink_.get(); }

void Job::Notify() { cv_.notify_all(); }

bool Job::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.done;
}

void Job::SetAccepted(int cached_tokens) {
  accepted_by_loop = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.accepted = true;
    pending_.cached_tokens = cached_tokens;
    changed_ = true;
  }
  Notify();
}

void Job::SetRejected(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.rejected = status;
    changed_ = true;
  }
  for (int i = 0; i < spec_.n; ++i) sinks_[i]->Finish("error", status);
}

void Job::FinishUnsubmitted(int choice, const std::string& reason, const Status& status) {
  sinks_[choice]->Finish(reason, status);
}

void Job::RequestCancel() { cancel_.store(true); }

bool Job::Wait(std::chrono::milliseconds timeout, JobUpdate* out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!changed_) cv_.wait_for(lock, timeout, [&] { return changed_; });
  if (!changed_) return false;
  changed_ = false;
  out->accepted = pending_.accepted;
  out->rejected = pending_.rejected;
  out->cached_tokens = pending_.cached_tokens;
  out->done = pending_.done;
  out->choices.resize(pending_.choices.size());
  for (size_t i = 0; i < pending_.choices.size(); ++i) {
    ChoiceUpdate& from = pending_.choices[i];
    ChoiceUpdate& to = out->choices[i];
    to.text = std::move(from.text);
    to.tokens = std::move(from.tokens);
    to.logprobs = std::move(from.logprobs);
    from.text.clear();
    from.tokens.clear();
    from.logprobs.clear();
    to.finished = from.finished;
    to.finish_reason = from.finish_reason;
    to.stop_string = from.stop_string;
    to.error = from.error;
    to.completion_tokens = from.completion_tokens;
  }
  return true;
}

}  // namespace g4::server
