// Conversations and prompts saved with their KV cache (.g4kv, kv/kv_file.h)
// from the command line: `g4 chat`'s /save and /load, and `g4 generate
// --prompt-cache FILE`. A file only loads into the model (weights and
// tokenizer) and KV scheme that wrote it.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "kv/kv_file.h"

namespace g4::cli {

// What a session file must match: the model's fingerprint and a hash of
// DIR/tokenizer.json (16 hex digits each).
KvFileIdentity SessionIdentity(const ModelBundle& bundle, const std::string& model_dir);

// Writes what `gen` holds (its KV and token ids) to `path`. InvalidArgument
// when it holds nothing.
Status SaveSession(const std::string& path, Engine& engine, const Generator& gen, const KvFileIdentity& identity);

// Reads `path` into a new sequence of the engine's pool; the caller decides
// whether to Adopt it.
StatusOr<LoadedKv> LoadSession(const std::string& path, Engine& engine, const KvFileIdentity& identity);

}  // namespace g4::cli
