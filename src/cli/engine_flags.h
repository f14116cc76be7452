// Flags every command that runs a model shares: the backend, the KV scheme
// and the step size, turned into a loaded model and an Engine.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace g4::cli {

struct EngineFlags {
  std::string backend = "auto";
  std::string kv;  // set by AddEngineFlags to the command's default
  int64_t chunk = 512;
  int max_seqs = 16;
};

// --backend, --kv (default `default_kv`), --chunk (rows per step: the
// prefill chunk) and, when `batch` is set, --max-seqs.
void AddEngineFlags(CLI::App& app, EngineFlags& flags, const std::string& default_kv, bool batch = false);

EngineOptions ToEngineOptions(const EngineFlags& flags);

}  // namespace g4::cli
