#include "engine/prefix_cache.h"

#include <algorithm>

namespace g4 {
namespace {

int64_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin();
}

bool IsPrefix(std::span<const int32_t> prefix, std::span<const int32_t> of) {
  return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

}  // namespace

PrefixCache::PrefixCache(KvPool& pool, const PrefixCacheOptions& options, KvDiskCache* disk)
    : pool_(pool), options_(options), disk_(disk) {}

PrefixCache::~PrefixCache() = default;

PrefixCache::Hit PrefixCache::Lookup(std::span<const int32_t> tokens, int64_t max_tokens, bool count) {
  if (count) {
    ++stats_.lookups;
    stats_.lookup_tokens += static_cast<int64_t>(tokens.size());
  }
  Hit hit;
  if (!enabled()) return hit;
  max_tokens = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  List::iterator best = entries_.end();
  int64_t best_n = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const int64_t m = std::min(CommonPrefix(it->tokens, tokens), max_tokens);
    if (m <= best_n || !pool_.CanCut(it->seq, m)) continue;
    best = it;
    best_n = m;
  }
  if (disk_) {
    const KvDiskCache::Candidate c = disk_->Best(tokens);
    const int64_t m = std::min(c.common, max_tokens);
    const bool in_memory = std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) {
      return e.on_disk && disk_->NameOf(e.tokens) == c.name;
    });
    if (m > best_n && !c.name.empty() && !in_memory) {
      auto loaded = disk_->Load(c.name, pool_);
      if (loaded.ok()) {
        ++stats_.disk_loads;
        Add(std::move(loaded->seq), std::move(loaded->tokens), /*on_disk=*/true);
        if (pool_.CanCut(entries_.front().seq, m)) {
          best = entries_.begin();
          best_n = m;
        }
      } else if (loaded.status().code() != StatusCode::kResourceExhausted) {
        ++stats_.disk_errors;
      }
    }
  }
  if (best == entries_.end()) return hit;
  auto fork = pool_.Fork(best->seq, best_n);
  if (!fork.ok()) return hit;  // CanCut said yes: not expected
  entries_.splice(entries_.begin(), entries_, best);
  hit.seq = std::move(fork).value();
  hit.tokens = best_n;
  if (count) {
    ++stats_.hits;
    stats_.reused_tokens += best_n;
  }
  Enforce();  // a disk load may have pushed the cache over its limits
  return hit;
}

void PrefixCache::Insert(const KvSeq& seq, std::vector<int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (!enabled() || n < options_.min_tokens || n > seq.length() || !pool_.CanCut(seq, n)) return;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (IsPrefix(tokens, it->tokens) && pool_.CanCut(it->seq, n)) {  // already covered
      entries_.splice(entries_.begin(), entries_, it);
      return;
    }
  }
  auto fork = pool_.Fork(seq, n);
  if (!fork.ok()) return;
  // Entries the new one covers (it can be cut where they end) go.
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (IsPrefix(it->tokens, tokens) && pool_.CanCut(*fork, static_cast<int64_t>(it->tokens.size())))
      Drop(it, /*save=*/false);
    it = next;
  }
  ++stats_.inserts;
  Add(std::move(fork).value(), std::move(tokens), /*on_disk=*/false);
  Enforce();
}

void PrefixCache::Add(KvSeq seq, std::vector<int32_t> tokens, bool on_disk) {
  Entry e;
  e.bytes = pool_.ProjectedBytes(static_cast<int64_t>(tokens.size()));
  e.seq = std::move(seq);
  e.tokens = std::move(tokens);
  e.on_disk = on_disk;
  bytes_ += e.bytes;
  entries_.push_front(std::move(e));
}

bool PrefixCache::SaveToDisk(Entry& e) {
  if (!disk_ || e.on_disk) return true;
  Status s = disk_->Save(pool_, e.seq, e.tokens);
  if (!s.ok()) {
    ++stats_.disk_errors;
    return false;
  }
  ++stats_.disk_saves;
  e.on_disk = true;
  return true;
}

void PrefixCache::Drop(List::iterator it, bool save) {
  if (save) SaveToDisk(*it);
  bytes_ -= it->bytes;
  entries_.erase(it);  // releases the fork's references
}

void PrefixCache::Enforce() {
  while (!entries_.empty() &&
         (bytes_ > options_.max_bytes || static_cast<int64_t>(entries_.size()) > options_.max_entries)) {
    Drop(std::prev(entries_.end()), /*save=*/true);
    ++stats_.evictions;
  }
}

bool PrefixCache::EvictOne() {
  if (entries_.empty()) return false;
  Drop(std::prev(entries_.end()), /*save=*/true);
  ++stats_.evictions;
  return true;
}

void PrefixCache::Flush() {
  for (Entry& e : entries_) SaveToDisk(e);
}

void PrefixCache::Clear() {
  entries_.clear();
  bytes_ = 0;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.entries = static_cast<int64_t>(entries_.size());
  s.bytes = bytes_;
  if (disk_) {
    s.disk_entries = disk_->entries();
    s.disk_bytes = disk_->bytes();
  }
  return s;
}

}  // namespace g4
