// The flags g4 commands share, one spelling everywhere:
//   -m/--model MODEL   a directory or a Hugging Face repo id (ORG/NAME[@REV],
//                      engine/model_locator.h); the first positional
//                      argument is an alias
//   -t/--threads N     OpenMP threads (default: OMP_NUM_THREADS, else all cores)
//   -v/--verbose       the settings in use, on stderr
//   -q/--quiet         nothing on stderr but errors
//   --json             the report as JSON on stdout (commands that report)
//   -c/--ctx-size N    where a context applies (the command says what it bounds)
//   --backend, --kv, --chunk, --max-seqs, --gpu-memory   where a model runs
// and the model loading every command does with them: resolve MODEL,
// read a cold checkpoint into the page cache with a progress bar, load.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_bundle.h"

namespace g4::cli {

struct CommonFlags {
  std::string model;  // as typed; see ResolveModel
  int threads = 0;    // 0: OpenMP's default
  bool verbose = false, quiet = false, json = false;
};

enum CommonFlag : unsigned {
  kModelFlag = 1u << 0,    // -m/--model
  kThreadsFlag = 1u << 1,  // -t/--threads
  kJsonFlag = 1u << 2,     // --json
};

// -v/--verbose and -q/--quiet always; the others as `which` says.
void AddCommonFlags(CLI::App& app, CommonFlags& flags, unsigned which);

// After parsing: the model may also come as the first positional argument.
// `positionals` are the command's positional slots in order, the first one
// being the model's; with -m given, what the parser put into them moves one
// slot on. A usage status when no model is given (when `model_required`) or
// there are too many arguments. Also applies -t.
Status FinishCommonFlags(CommonFlags& flags, const std::vector<std::string*>& positionals,
                         bool model_required = true);

// Moves the values the parser put into `slots` one slot on (slot 0, the
// model's, ends empty): for when the model came from -m or elsewhere. A
// usage status when they do not fit.
Status ShiftPositionals(const std::vector<std::string*>& slots);

struct EngineFlags {
  std::string backend = "auto";
  std::string kv;  // set by AddEngineFlags to the command's default
  int64_t chunk = 512;
  int max_seqs = 16;
  uint64_t gpu_memory = 0;  // --gpu-memory, bytes; 0: no cap
};

// --backend, --kv (default `default_kv`), --chunk (rows per step: the
// prefill chunk), --gpu-memory and, when `batch` is set, --max-seqs.
void AddEngineFlags(CLI::App& app, EngineFlags& flags, const std::string& default_kv, bool batch = false);
// --backend alone (commands that run a model without a KV choice).
void AddBackendFlag(CLI::App& app, std::string& backend);
// --gpu-memory SIZE into `bytes` (a size such as 40G; a bad one is a usage error).
void AddGpuMemoryFlag(CLI::App& app, uint64_t& bytes);

// -c/--ctx-size N; `what` ends the help text ("tokens per window").
void AddContextFlag(CLI::App& app, int64_t& ctx, const std::string& what);

EngineOptions ToEngineOptions(const EngineFlags& flags);

// The checkpoint directory of flags.model (engine/model_locator.h). With
// -v, says how it was found.
StatusOr<std::string> ResolveModel(const CommonFlags& flags);

// ResolveModel, then WarmCheckpoint (cli/warm_checkpoint.h: a cold
// checkpoint is read with a progress bar unless -q), then LoadModelBundle;
// with -v prints the backend, threads and load time.
// `dir`, when given, receives the checkpoint directory.
StatusOr<std::unique_ptr<ModelBundle>> LoadBundle(const CommonFlags& flags, const std::string& backend,
                                                  std::string* dir = nullptr);

// With -v: "[g4] TEXT" on stderr.
void Verbose(const CommonFlags& flags, const std::string& text);

}  // namespace g4::cli
