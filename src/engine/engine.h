// Engine: a model's serving state on one backend: the KV pool and the
// scheduler that steps sequences through the model. What `g4 generate`,
// `chat`, `bench`, `perplexity`, `kv-eval`, `logits` and the server share.
//
// Threading: as Scheduler (Submit/Cancel from any thread, stepping on one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/scheduler.h"
#include "kv/kv_pool.h"
#include "kv/kv_scheme.h"
#include "model/gemma4_model.h"

namespace g4 {

struct EngineOptions {
  std::string kv = "plain:bf16";  // --kv SPEC (kv/kv_scheme.h)
  int64_t max_step_tokens = 512;  // rows per step (prefill chunk budget)
  int max_seqs = 16;              // sequences running at once
  int64_t max_outputs = 0;        // logits rows per step; 0: max_seqs
  // KV pool size; 0: what memory_cap_bytes leaves, else on a device what
  // is free less a margin (the step buffers, 1 GiB and a 32nd of the free
  // memory), on the host half of the free memory (the CPU backend commits
  // pool pages only when they are first written).
  size_t kv_budget_bytes = 0;
  // --gpu-memory: the most the backend may hold for this engine in all
  // (placed weights, KV pool, step buffers); 0: no cap. The KV pool gets
  // the cap less what the backend holds at creation (Backend::HeldBytes)
  // less a sixteenth of the cap kept for step buffers; too small a cap is
  // an error naming the flag.
  size_t memory_cap_bytes = 0;
  int block_size = 16;
};

class Engine {
 public:
  // `model` must outlive the engine.
  static StatusOr<std::unique_ptr<Engine>> Create(Gemma4Model& model, const EngineOptions& options);

  Gemma4Model& model() { return model_; }
  KvPool& pool() { return *pool_; }
  Scheduler& scheduler() { return *scheduler_; }
  const EngineOptions& options() const { return options_; }

 private:
  Engine(Gemma4Model& model, const EngineOptions& options) : model_(model), options_(options) {}
  Gemma4Model& model_;
  EngineOptions options_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace g4
