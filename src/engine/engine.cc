#include "engine/engine.h"

#include <string>

#include "core/byte_size.h"

namespace g4 {
namespace {

// The KV pool's bytes (EngineOptions::kv_budget_bytes, memory_cap_bytes).
StatusOr<size_t> KvBudget(const Backend& backend, const EngineOptions& o) {
  const size_t cap = o.memory_cap_bytes, held = backend.HeldBytes();
  if (cap == 0) return o.kv_budget_bytes != 0 ? o.kv_budget_bytes : backend.FreeMemory() / 2;
  const size_t reserve = cap / 16;  // step buffers, which grow with the chunk
  const std::string what = "--gpu-memory " + GiB(cap) + ": the " + backend.name() + " backend holds " + GiB(held) +
                           " already (weights and buffers)";
  if (held + reserve >= cap) return ResourceExhausted(what + ", and step buffers need room: nothing is left for the KV pool");
  const size_t room = cap - held - reserve;
  if (o.kv_budget_bytes == 0) return room;
  if (o.kv_budget_bytes > room)
    return ResourceExhausted(what + ", so a KV pool of " + GiB(o.kv_budget_bytes) + " does not fit (at most " +
                             GiB(room) + ")");
  return o.kv_budget_bytes;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(Gemma4Model& model, const EngineOptions& options) {
  auto e = std::unique_ptr<Engine>(new Engine(model, options));
  G4_ASSIGN_OR_RETURN(KvScheme scheme, KvScheme::Parse(options.kv));
  G4_ASSIGN_OR_RETURN(size_t budget, KvBudget(model.backend(), options));
  StatusOr<KvPoolOptions> sized = KvPoolOptions::ForBudget(model.config(), scheme, budget, options.max_seqs,
                                                           options.max_step_tokens, options.block_size);
  if (!sized.ok() && options.memory_cap_bytes != 0)
    return sized.status().WithContext("--gpu-memory " + GiB(options.memory_cap_bytes) + " leaves " + GiB(budget) +
                                      " for the KV pool");
  G4_ASSIGN_OR_RETURN(KvPoolOptions pool_options, std::move(sized));
  G4_ASSIGN_OR_RETURN(e->pool_, KvPool::Create(model.config(), scheme, model.backend(), pool_options));
  SchedulerOptions so;
  so.max_step_tokens = options.max_step_tokens;
  so.max_seqs = options.max_seqs;
  so.max_outputs = options.max_outputs;
  G4_ASSIGN_OR_RETURN(e->scheduler_, Scheduler::Create(model, *e->pool_, so));
  return e;
}

}  // namespace g4
