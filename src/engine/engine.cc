#include "engine/engine.h"

#include <string>

#include "core/byte_size.h"

namespace g4 {
namespace {

SchedulerOptions SchedulerOptionsOf(const EngineOptions& o) {
  SchedulerOptions so;
  so.max_step_tokens = o.max_step_tokens;
  so.max_seqs = o.max_seqs;
  so.max_outputs = o.max_outputs;
  return so;
}

// Device memory kept free beside the pool and the activations by default:
// the backend's step scratch (attention split states, quantized inputs,
// CUDA graphs) and the driver's own.
constexpr size_t kDeviceReserve = size_t{1} << 30;

// The default KV pool on a device: what is free less a margin (the step
// buffers the scheduler will allocate, kDeviceReserve and a 32nd of the free
// memory), as vLLM takes a fraction of the GPU. On the host: half the free
// memory (pool pages are committed only when first written).
StatusOr<size_t> DefaultKvBudget(const Gemma4Model& model, const EngineOptions& o) {
  const Backend& backend = model.backend();
  const size_t free = backend.FreeMemory();
  if (backend.space() != MemorySpace::kDevice) return free / 2;
  const size_t steps =
      Activations::Bytes(model.config(), Scheduler::ActivationLimitsFor(SchedulerOptionsOf(o)), o.block_size);
  const size_t margin = steps + kDeviceReserve + free / 32;
  if (free <= margin)
    return ResourceExhausted("[engine] the " + backend.name() + " device has " + GiB(free) +
                             " free and steps need " + GiB(margin) +
                             " beside the KV pool: nothing is left for it (a smaller --chunk or --max-seqs, or an "
                             "explicit --kv-memory)");
  return free - margin;
}

// The KV pool's bytes (EngineOptions::kv_budget_bytes, memory_cap_bytes).
StatusOr<size_t> KvBudget(const Gemma4Model& model, const EngineOptions& o) {
  const Backend& backend = model.backend();
  const size_t cap = o.memory_cap_bytes, held = backend.HeldBytes();
  if (cap == 0) return o.kv_budget_bytes != 0 ? o.kv_budget_bytes : DefaultKvBudget(model, o);
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
  G4_ASSIGN_OR_RETURN(size_t budget, KvBudget(model, options));
  StatusOr<KvPoolOptions> sized = KvPoolOptions::ForBudget(model.config(), scheme, budget, options.max_seqs,
                                                           options.max_step_tokens, options.block_size);
  if (!sized.ok() && options.memory_cap_bytes != 0)
    return sized.status().WithContext("--gpu-memory " + GiB(options.memory_cap_bytes) + " leaves " + GiB(budget) +
                                      " for the KV pool");
  G4_ASSIGN_OR_RETURN(KvPoolOptions pool_options, std::move(sized));
  G4_ASSIGN_OR_RETURN(e->pool_, KvPool::Create(model.config(), scheme, model.backend(), pool_options));
  G4_ASSIGN_OR_RETURN(e->scheduler_, Scheduler::Create(model, *e->pool_, SchedulerOptionsOf(options)));
  return e;
}

}  // namespace g4
