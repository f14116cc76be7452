// Saving one sequence of a KvPool to a file and loading it back (.g4kv).
//
// Layout (little-endian):
//   [0, 64)     preamble: magic "G4KVSEQ\0", u32 format version, u32 flags (0),
//               u64 header offset, u64 header bytes, u32 header CRC32C,
//               u32 preamble CRC32C (of bytes 0..40), zero padding
//   [4096, ...) tensors, each at a 4096-aligned offset: per layer that owns
//               K/V, the records KvPool::Export gives (tokens first_token ..
//               length - 1, verbatim, in the layer's store format)
//   [header offset, end of file)  the header, JSON: format version, model
//               fingerprint, tokenizer hash, scheme signature, length, token
//               ids, converted_at per group, and per layer its signature,
//               first token, record bytes and tensor slot (offset, bytes,
//               CRC32C).
// The header comes last so tensors stream out with their checksums; the
// preamble, written once everything else is, points at it. Files are
// written to a temporary name, fsynced and renamed, so a crash leaves the old
// file or the new one, never a mix. Block ids and the pool's block size are
// not saved: a file loads into any pool with the same model and scheme.
//
// Loading validates everything before building anything: a file from
// another model, tokenizer or scheme, a flipped byte, or a truncated file is
// an error naming the file and the problem, and the pool is not touched (the
// result is a new sequence).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/kv_pool.h"

namespace g4 {

constexpr uint32_t kKvFileVersion = 2;

// What a cache file must agree with to be usable.
struct KvFileIdentity {
  std::string model_fingerprint;  // kv/model_fingerprint.h
  std::string tokenizer_hash;     // may be empty
};

// tokens: the ids seq has processed (tokens.size() == seq's length).
Status SaveKvFile(const std::string& path, const KvPool& pool, const KvSeq& seq, const KvFileIdentity& identity,
                  const std::vector<int32_t>& tokens);

struct LoadedKv {
  KvSeq seq;
  std::vector<int32_t> tokens;
};

// Loads a file saved for this pool's model (config + identity) and scheme
// into a new sequence of `pool`.
StatusOr<LoadedKv> LoadKvFile(const std::string& path, KvPool& pool, const KvFileIdentity& identity);

}  // namespace g4
