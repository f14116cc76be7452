// StepLoop: the one thread that drives the engine for the server.
//
// Handler threads Post jobs; the loop takes them between steps, finds each
// prompt's longest cached prefix (PrefixCache), submits one scheduler
// sequence per choice, and steps the scheduler while anything runs, so
// requests join and leave at every step. Everything that touches the KV
// pool (the scheduler, the prefix cache and its disk tier) happens here.
//
// A prompt whose whole blocks are not all cached yet runs them first as a
// prefill sequence of its own (no sampling); the cache keeps its KV when it
// finishes, and then every choice of the job (n of them) forks it and runs
// only the rest: one copy of the prompt, however many choices or later
// requests share it. A job whose client went away is cancelled
// (Scheduler::Cancel), which frees its blocks at once. When admission is
// blocked and cached prefixes hold blocks, the least recently used ones are
// evicted (to the disk tier when there is one).
//
// Shutdown: BeginDrain refuses new jobs; CancelAll cancels what runs; Stop
// ends the thread once the scheduler is idle and flushes the prefix cache to
// disk.
//
// Threading: Post, BeginDrain, CancelAll, Stop, in_flight and idle are
// thread-safe; the rest of the work runs on the loop's own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/prefix_cache.h"
#include "server/job.h"
#include "server/metrics.h"

namespace g4::server {

class StepLoop {
 public:
  // `engine`, `cache` (may be null) and `metrics` must outlive the loop.
  // `log` receives one line per event worth telling.
  StepLoop(Engine& engine, PrefixCache* cache, Metrics& metrics, std::function<void(const std::string&)> log);
  ~StepLoop();  // Stop()

  void Start();
  // Queues a job. False (and the job untouched) while draining.
  bool Post(std::shared_ptr<Job> job);
  // Jobs posted and not finished.
  int64_t in_flight() const { return in_flight_.load(); }
  void BeginDrain();
  bool draining() const { return draining_.load(); }
  void CancelAll();
  // Cancels what is left, waits for the thread, flushes the prefix cache.
  void Stop();

 private:
  void Run();
  void Wake();
  void StartJob(const std::shared_ptr<Job>& job);
  // False when the scheduler refused it (the job or choice is finished).
  bool SubmitChoice(const std::shared_ptr<Job>& job, int choice, PrefixCache::Hit hit);
  void ReleaseDeferred();
  void CheckCancels();
  void Publish();

  Engine& engine_;
  PrefixCache* cache_;
  Metrics& metrics_;
  std::function<void(const std::string&)> log_;
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> inbox_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  bool cancel_all_ = false;                   // guarded by mu_
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};

  // Loop thread only.
  std::vector<std::shared_ptr<Job>> active_;
  int deferred_ = 0;
};

}  // namespace g4::server
