// Saving a sequence's caches to a file and loading them back (.g4kv).
//
// Layout (little-endian):
//   [0, 64)     preamble: magic "G4KVSEQ\0", u32 format version, u32 flags (0),
//               u64 header offset, u64 header bytes, u32 header CRC32C,
//               u32 preamble CRC32C (of bytes 0..40), zero padding
//   [4096, ...) tensors, each at a 4096-aligned offset (the layer states:
//               encoded records and positions, verbatim)
//   [header offset, end of file)  the header, JSON: format version, model
//               fingerprint, tokenizer hash, scheme signature, token ids,
//               and per layer its signature, metadata and tensor slots
//               (offset, bytes, CRC32C).
// The header comes last so tensors stream out one layer at a time with
// their checksums; the preamble, written once everything else is, points at
// it. Files are written to a temporary name, fsynced and renamed, so a
// crash leaves the old file or the new one, never a mix.
//
// Loading validates everything before building anything: a file from
// another model, tokenizer or scheme, a flipped byte, or a truncated file is
// an error naming the file and the problem, and the caller's state is not
// touched (the result is a fresh SequenceKv).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/config.h"
#include "kv/kv_scheme.h"
#include "kv/sequence_kv.h"

namespace g4 {

constexpr uint32_t kKvFileVersion = 1;

// What a cache file must agree with to be usable.
struct KvFileIdentity {
  std::string model_fingerprint;  // kv/model_fingerprint.h
  std::string tokenizer_hash;     // may be empty
};

// tokens: the ids kv has processed (tokens.size() == kv.position()).
Status SaveKvFile(const std::string& path, const SequenceKv& kv, const KvFileIdentity& identity,
                  const std::vector<int32_t>& tokens);

struct LoadedKv {
  std::unique_ptr<SequenceKv> kv;
  std::vector<int32_t> tokens;
};

// Loads a file saved for this model (config + identity) and scheme.
StatusOr<LoadedKv> LoadKvFile(const std::string& path, const Gemma4Config& config, const KvScheme& scheme,
                              const KvFileIdentity& identity);

}  // namespace g4
