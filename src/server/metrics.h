// Metrics: what GET /metrics reports, in the Prometheus text format
// (version 0.0.4): request counts by endpoint and status, token counters,
// time-to-first-token and inter-token latency histograms, and a snapshot of
// the engine (queue depth, running sequences, KV blocks used/free per store,
// prefix-cache counters) that the step loop publishes after every step.
//
// Threading: every method is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/prefix_cache.h"
#include "engine/scheduler.h"

namespace g4::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // "# TYPE name histogram" and its _bucket/_sum/_count lines.
  void Render(const std::string& name, const std::string& help, std::string* out) const;
  int64_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; last = +Inf
  double sum_ = 0;
  int64_t total_ = 0;
};

struct KvStoreGauge {
  std::string group;  // "full" | "sliding"
  int store = 0;
  int64_t used = 0, free = 0, capacity = 0;
};

// What the step loop publishes (stepping thread -> metrics readers).
struct EngineSnapshot {
  int running = 0;          // sequences in the scheduler's running set
  int queued = 0;           // waiting: in the scheduler's queue, the loop's inbox, deferred choices
  int64_t in_flight = 0;    // jobs posted and not finished
  SchedulerStats scheduler;
  std::vector<KvStoreGauge> kv;
  size_t kv_used_bytes = 0, kv_capacity_bytes = 0;
  PrefixCacheStats cache;
};

class Metrics {
 public:
  Metrics();

  void CountRequest(const std::string& endpoint, int http_status);
  void AddPrompt(int64_t prompt_tokens, int64_t cached_tokens);
  void AddGenerated(int64_t tokens);
  void ObserveTtft(double seconds);
  void ObserveItl(double seconds);
  void Publish(EngineSnapshot snapshot);
  EngineSnapshot snapshot() const;

  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_ = 0;
  EngineSnapshot snapshot_;
  Histogram ttft_, itl_;
};

}  // namespace g4::server
