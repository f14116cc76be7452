#include "server/metrics.h"

#include <cstdio>

namespace g4::server {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

void Header(std::string* out, const std::string& name, const char* type, const std::string& help) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Metric(std::string* out, const std::string& name, const char* type, const std::string& help, double v) {
  Header(out, name, type, help);
  *out += name + " " + Num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++total_;
}

int64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

void Histogram::Render(const std::string& name, const std::string& help, std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  Header(out, name, "histogram", help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  *out += name + "_sum " + Num(sum_) + "\n";
  *out += name + "_count " + std::to_string(total_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56}) {}

void Metrics::CountRequest(const std::string& endpoint, int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, http_status}];
}

void Metrics::AddPrompt(int64_t prompt_tokens, int64_t cached_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt_tokens;
  cached_tokens_ += cached_tokens;
}

void Metrics::AddGenerated(int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  generated_ += tokens;
}

void Metrics::ObserveTtft(double s) { ttft_.Observe(s); }
void Metrics::ObserveItl(double s) { itl_.Observe(s); }

void Metrics::Publish(EngineSnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(snapshot);
}

EngineSnapshot Metrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

std::string Metrics::Render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  Header(&out, "g4_requests_total", "counter", "HTTP requests by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    out += "g4_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  Metric(&out, "g4_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", prompt_tokens_);
  Metric(&out, "g4_cached_prompt_tokens_total", "counter", "Prompt tokens served from the prefix cache.",
         cached_tokens_);
  Metric(&out, "g4_generation_tokens_total", "counter", "Tokens sampled.", generated_);
  ttft_.Render("g4_time_to_first_token_seconds", "From receiving a request to its first sampled token.", &out);
  itl_.Render("g4_inter_token_latency_seconds", "Between consecutive sampled tokens of a sequence.", &out);
  const EngineSnapshot& s = snapshot_;
  Metric(&out, "g4_queue_depth", "gauge", "Sequences waiting to run.", s.queued);
  Metric(&out, "g4_running_sequences", "gauge", "Sequences running (rows in the step batch).", s.running);
  Metric(&out, "g4_requests_in_flight", "gauge", "Generation requests accepted and not finished.", s.in_flight);
  Metric(&out, "g4_steps_total", "counter", "Engine steps run.", s.scheduler.steps);
  Metric(&out, "g4_step_rows_total", "counter", "Token rows run through the model.", s.scheduler.rows);
  Metric(&out, "g4_forward_seconds_total", "counter", "Time spent in model steps.", s.scheduler.forward_seconds);
  for (const char* which : {"used", "free"}) {
    const std::string name = std::string("g4_kv_blocks_") + which;
    Header(&out, name, "gauge", std::string("KV blocks ") + which + ", per layer group and store.");
    for (const KvStoreGauge& g : s.kv)
      out += name + "{group=\"" + g.group + "\",store=\"" + std::to_string(g.store) + "\"} " +
             std::to_string(which[0] == 'u' ? g.used : g.free) + "\n";
  }
  Metric(&out, "g4_kv_used_bytes", "gauge", "KV pool bytes in use.", static_cast<double>(s.kv_used_bytes));
  Metric(&out, "g4_kv_capacity_bytes", "gauge", "KV pool capacity.", static_cast<double>(s.kv_capacity_bytes));
  const PrefixCacheStats& c = s.cache;
  Metric(&out, "g4_prefix_cache_hit_rate", "gauge", "Prompt tokens served from the prefix cache / prompt tokens looked up.",
         c.lookup_tokens > 0 ? static_cast<double>(c.reused_tokens) / c.lookup_tokens : 0.0);
  Metric(&out, "g4_prefix_cache_lookups_total", "counter", "Prefix-cache lookups.", c.lookups);
  Metric(&out, "g4_prefix_cache_hits_total", "counter", "Lookups that reused at least one token.", c.hits);
  Metric(&out, "g4_prefix_cache_entries", "gauge", "Cached prefixes in memory.", c.entries);
  Metric(&out, "g4_prefix_cache_bytes", "gauge", "Bytes the cached prefixes account for.", static_cast<double>(c.bytes));
  Metric(&out, "g4_prefix_cache_evictions_total", "counter", "Entries evicted from memory.", c.evictions);
  Metric(&out, "g4_prefix_cache_disk_entries", "gauge", "Entries in the disk tier.", c.disk_entries);
  Metric(&out, "g4_prefix_cache_disk_bytes", "gauge", "Bytes of the disk tier.", static_cast<double>(c.disk_bytes));
  Metric(&out, "g4_prefix_cache_disk_loads_total", "counter", "Entries loaded from disk.", c.disk_loads);
  Metric(&out, "g4_prefix_cache_disk_saves_total", "counter", "Entries written to disk.", c.disk_saves);
  Metric(&out, "g4_prefix_cache_disk_errors_total", "counter", "Disk entries skipped as corrupt or not written.",
         c.disk_errors);
  return out;
}

}  // namespace g4::server
