// KvDiskCache: the disk tier of the prefix cache. A directory of cached
// sequences, each two files named after a hash of its identity and tokens:
//
//   NAME.g4kv  the KV (kv/kv_file.h: checksummed, written atomically)
//   NAME.idx   its index record: magic "G4KVIDX1", u32 payload bytes, u32
//              CRC32C of the payload, then the payload, JSON: model
//              fingerprint, tokenizer hash, KV scheme, token ids
//
// The .idx is written (temporary name, fsync, rename, directory fsync) only
// after its .g4kv is in place, so an entry exists exactly when its .idx does:
// a crash at any point leaves either a complete entry or none (an orphan
// .g4kv or a temporary file, removed by the next Open). Loading re-verifies
// every checksum (LoadKvFile); an entry that fails is logged, dropped from
// the index and deleted, so a damaged file is never served.
//
// Open reads only the small .idx files, so startup does not touch the KV
// bytes. Entries of another model, tokenizer or scheme are left alone (and
// not listed). Over `max_bytes`, the least recently used entries (by file
// modification time, refreshed on load) are deleted.
//
// Threading: none; the owner (PrefixCache, on the stepping thread) calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/kv_file.h"
#include "kv/kv_pool.h"

namespace g4 {

struct KvDiskCacheOptions {
  std::string dir;
  KvFileIdentity identity;
  std::string scheme;          // KvScheme::signature() of the pool the entries load into
  uint64_t max_bytes = 0;      // 0: no limit
  std::function<void(const std::string&)> log;  // one line per event worth telling; may be empty
};

class KvDiskCache {
 public:
  // Creates `dir` if needed, removes temporary files and orphans, and reads
  // the index. IoError when the directory cannot be created or listed.
  static StatusOr<std::unique_ptr<KvDiskCache>> Open(KvDiskCacheOptions options);

  // The file name stem of an entry holding `tokens` (16 hex digits).
  std::string NameOf(std::span<const int32_t> tokens) const;
  bool Contains(const std::string& name) const;

  struct Candidate {
    std::string name;    // empty: none
    int64_t common = 0;  // tokens shared with the query, from the start
  };
  // The entry sharing the longest prefix with `tokens` (index only).
  Candidate Best(std::span<const int32_t> tokens) const;

  // Loads an entry into `pool` as a new sequence. A file that fails its
  // checks is logged, deleted and forgotten; ResourceExhausted (pool full)
  // keeps it.
  StatusOr<LoadedKv> Load(const std::string& name, KvPool& pool);
  // Writes `seq` (holding exactly `tokens`) unless the entry exists.
  Status Save(const KvPool& pool, const KvSeq& seq, const std::vector<int32_t>& tokens);

  int64_t entries() const { return static_cast<int64_t>(index_.size()); }
  uint64_t bytes() const;

 private:
  struct Entry {
    std::string name;
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
    int64_t last_use = 0;  // file time, nanoseconds
  };
  explicit KvDiskCache(KvDiskCacheOptions options) : options_(std::move(options)) {}
  Status Scan();
  void Remove(size_t i, bool delete_files);
  void EnforceLimit();
  void Log(const std::string& line) const;
  std::string PathOf(const std::string& name, const char* ext) const;

  KvDiskCacheOptions options_;
  std::vector<Entry> index_;
};

// Atomically writes `bytes` to `path` (temporary name, fsync, rename,
// directory fsync).
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace g4
