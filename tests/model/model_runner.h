// Test helper: drives Gemma4Model::Forward directly (below the engine's
// scheduler) for model-level tests: one pool, one activation arena, and
// steps built by hand from (sequence, tokens) runs.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "test_backend.h"
#include "kv/kv_pool.h"
#include "model/activations.h"
#include "model/gemma4_model.h"
#include "test_util.h"

namespace g4::testing {

class ModelRunner {
 public:
  // Loads testdata/models/NAME with a pool in `kv` on the test backend
  // (test_backend.h), or on the CPU backend's kernel variant `kernels` when
  // one is named.
  explicit ModelRunner(const std::string& name, const std::string& kv = "plain", int block_size = 4,
                       int64_t max_rows = 64, int max_seqs = 8, bool sliding_ring = true,
                       CpuKernels kernels = CpuKernels::kAuto)
      : backend_(kernels == CpuKernels::kAuto ? MakeTestBackend() : MakeCpuBackend(kernels)) {
    auto m = Gemma4Model::Load(TestDataPath("models/" + name), *backend_);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return;
    model_ = std::move(m).value();
    auto scheme = KvScheme::Parse(kv);
    EXPECT_TRUE(scheme.ok()) << scheme.status().ToString();
    scheme->sliding_ring = sliding_ring;
    auto options = KvPoolOptions::ForBudget(model_->config(), *scheme, size_t{64} << 20, max_seqs, max_rows,
                                            block_size);
    EXPECT_TRUE(options.ok()) << options.status().ToString();
    auto pool = KvPool::Create(model_->config(), *scheme, *backend_, *options);
    EXPECT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool).value();
    ActivationLimits limits;
    limits.max_rows = max_rows;
    limits.max_seqs = max_seqs;
    limits.max_outputs = max_rows;
    auto act = Activations::Create(model_->config(), *backend_, limits, block_size);
    EXPECT_TRUE(act.ok()) << act.status().ToString();
    act_ = std::move(act).value();
  }

  bool ok() const { return model_ && pool_; }
  Gemma4Model& model() { return *model_; }
  KvPool& pool() { return *pool_; }
  Backend& backend() { return *backend_; }
  int64_t vocab() const { return model_->vocab_size(); }

  struct Run {
    KvSeq* seq;
    std::vector<int32_t> tokens;
    bool all_logits = true;  // else the last row only
  };
  // One step over several sequences; per run, its logits rows [n or 1, V].
  // Maintains delayed precision before the step when due.
  StatusOr<std::vector<std::vector<float>>> Step(std::vector<Run> runs) {
    StepBatch step;
    step.Clear();
    for (Run& r : runs) {
      if (pool_->max_append_tokens(*r.seq) == 0) G4_RETURN_IF_ERROR(pool_->Maintain(*r.seq));
      G4_RETURN_IF_ERROR(pool_->PrepareAppend(*r.seq, static_cast<int64_t>(r.tokens.size())));
      const int64_t n = static_cast<int64_t>(r.tokens.size());
      step.Add(*r.seq, r.tokens, r.all_logits ? 0 : n - 1);
    }
    G4_RETURN_IF_ERROR(model_->Forward(step, *pool_, act_));
    const int64_t V = vocab();
    std::vector<float> all(step.num_outputs() * V);
    backend_->CopyToHost(all.data(), act_.logits.data, all.size() * sizeof(float));
    backend_->Sync();
    std::vector<std::vector<float>> out;
    int64_t o = 0;
    for (Run& r : runs) {
      const int64_t rows = r.all_logits ? static_cast<int64_t>(r.tokens.size()) : 1;
      out.emplace_back(all.begin() + o * V, all.begin() + (o + rows) * V);
      o += rows;
      pool_->Commit(*r.seq, static_cast<int64_t>(r.tokens.size()));
    }
    return out;
  }

  // One sequence in chunks of at most `chunk` tokens (cut at a pending
  // precision change, as the scheduler does); every row's logits.
  StatusOr<std::vector<float>> Prefill(KvSeq& seq, const std::vector<int32_t>& ids, int64_t chunk) {
    std::vector<float> logits;
    for (size_t done = 0; done < ids.size();) {
      int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(ids.size() - done));
      if (pool_->max_append_tokens(seq) == 0) G4_RETURN_IF_ERROR(pool_->Maintain(seq));
      n = std::min(n, pool_->max_append_tokens(seq));
      std::vector<int32_t> part(ids.begin() + done, ids.begin() + done + n);
      G4_ASSIGN_OR_RETURN(auto rows, Step({{&seq, part, true}}));
      logits.insert(logits.end(), rows[0].begin(), rows[0].end());
      done += n;
    }
    return logits;
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Gemma4Model> model_;
  std::unique_ptr<KvPool> pool_;
  Activations act_;
};

}  // namespace g4::testing
