#include "engine/engine.h"

namespace g4 {

StatusOr<std::unique_ptr<Engine>> Engine::Create(Gemma4Model& model, const EngineOptions& options) {
  auto e = std::unique_ptr<Engine>(new Engine(model, options));
  G4_ASSIGN_OR_RETURN(KvScheme scheme, KvScheme::Parse(options.kv));
  size_t budget = options.kv_budget_bytes;
  if (budget == 0) budget = model.backend().FreeMemory() / 2;
  G4_ASSIGN_OR_RETURN(KvPoolOptions pool_options,
                      KvPoolOptions::ForBudget(model.config(), scheme, budget, options.max_seqs,
                                               options.max_step_tokens, options.block_size));
  G4_ASSIGN_OR_RETURN(e->pool_, KvPool::Create(model.config(), scheme, model.backend(), pool_options));
  SchedulerOptions so;
  so.max_step_tokens = options.max_step_tokens;
  so.max_seqs = options.max_seqs;
  so.max_outputs = options.max_outputs;
  G4_ASSIGN_OR_RETURN(e->scheduler_, Scheduler::Create(model, *e->pool_, so));
  return e;
}

}  // namespace g4
