// PrefixCache: finished token prefixes kept in the KV pool for reuse (the
// server's prefix cache; vLLM's automatic prefix caching, on g4's pool).
//
// An entry is a KvSeq that shares its blocks by reference (KvPool::Fork) with
// the sequence it was taken from, plus the token ids it holds. Entries are
// forks, never the original sequences, so they carry no admission
// reservation and the blocks they share are stored once: n requests after
// one system prompt hold it once, plus their own tails.
//
// Lookup finds the entry sharing the longest token prefix with a prompt that
// the pool can cut there (KvPool::CanCut: at or past the minimum reusable
// offset, sliding-window blocks still present) and returns a fork of it;
// the caller runs only the rest of the prompt. With a disk tier, an entry on
// disk that shares a longer prefix is loaded first.
//
// Eviction is least-recently-used, within `max_bytes` (each entry counted as
// KvPool::ProjectedBytes of its length, so blocks shared between entries are
// counted once per entry: a conservative bound) and `max_entries`; the
// owner also evicts when the pool needs the blocks (EvictOne). An evicted
// entry is written to the disk tier first when there is one; Flush writes
// every entry (shutdown).
//
// Threading: none; the pool's thread (the scheduler's) only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv_disk_cache.h"
#include "kv/kv_pool.h"

namespace g4 {

struct PrefixCacheOptions {
  size_t max_bytes = 0;      // 0: caching off
  int max_entries = 4096;
  int64_t min_tokens = 16;   // shorter prefixes are not worth an entry
};

struct PrefixCacheStats {
  int64_t lookups = 0;
  int64_t hits = 0;            // lookups that reused at least one token
  int64_t lookup_tokens = 0;   // prompt tokens looked up
  int64_t reused_tokens = 0;   // of which served from the cache
  int64_t inserts = 0;
  int64_t evictions = 0;
  int64_t disk_loads = 0;
  int64_t disk_saves = 0;
  int64_t disk_errors = 0;     // entries skipped (corrupt) or not written
  int64_t entries = 0;
  size_t bytes = 0;
  int64_t disk_entries = 0;
  uint64_t disk_bytes = 0;
};

class PrefixCache {
 public:
  // `pool` (and `disk`, may be null) must outlive the cache.
  PrefixCache(KvPool& pool, const PrefixCacheOptions& options, KvDiskCache* disk = nullptr);
  ~PrefixCache();

  bool enabled() const { return options_.max_bytes > 0; }

  struct Hit {
    KvSeq seq;           // a fork holding tokens[0, tokens); invalid when nothing matched
    int64_t tokens = 0;
  };
  // The longest reusable prefix of `tokens`, at most `max_tokens` long (a
  // caller that must still run a token passes tokens.size() - 1). `count`:
  // include the lookup in the hit statistics (a caller looking up again what
  // it just stored itself passes false).
  Hit Lookup(std::span<const int32_t> tokens, int64_t max_tokens, bool count = true);

  // Keeps the first `tokens.size()` tokens of `seq` (which holds at least
  // that many) when the pool can cut it there. An entry that is a prefix of
  // the new one (and reachable through it) is replaced; a new one that an
  // entry already covers only refreshes that entry.
  void Insert(const KvSeq& seq, std::vector<int32_t> tokens);

  // Drops the least recently used entry (saving it to disk first when there
  // is a disk tier). False when there is none.
  bool EvictOne();
  // Writes every entry not yet on disk (no-op without a disk tier).
  void Flush();
  // Drops every entry (without saving).
  void Clear();

  PrefixCacheStats stats() const;

 private:
  struct Entry {
    KvSeq seq;
    std::vector<int32_t> tokens;
    size_t bytes = 0;
    bool on_disk = false;
  };
  using List = std::list<Entry>;  // most recently used first
  void Add(KvSeq seq, std::vector<int32_t> tokens, bool on_disk);
  void Drop(List::iterator it, bool save);
  void Enforce();
  bool SaveToDisk(Entry& e);

  KvPool& pool_;
  PrefixCacheOptions options_;
  KvDiskCache* disk_;
  List entries_;
  size_t bytes_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace g4
