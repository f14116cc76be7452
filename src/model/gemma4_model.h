// Gemma4Model: the Gemma 4 text decoder (transformers' modeling_gemma4.py;
// docs/architecture.md walks through it), written once over the Ops
// interface for a whole step of rows
// from many sequences. It owns the weights (views placed by the backend)
// and the RoPE tables; sequence state lives in the KvPool, scratch in
// Activations, so one model serves every sequence.
//
// A step makes no decision from computed data and allocates nothing: its
// host work is validating and uploading the StepBatch.
//
// Threading: Forward is not re-entrant (it drives the backend's stream).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "io/config.h"
#include "io/gemma4_weights.h"
#include "kv/kv_pool.h"
#include "model/activations.h"
#include "model/step_batch.h"

namespace g4 {

class Gemma4Model {
 public:
  // Loads DIR/config.json and the checkpoint in DIR and places the weights
  // on `backend`, which must outlive the model.
  static StatusOr<std::unique_ptr<Gemma4Model>> Load(const std::string& dir, Backend& backend);

  const Gemma4Config& config() const { return config_; }
  const Gemma4Weights& weights() const { return *weights_; }
  int vocab_size() const { return config_.vocab_size; }
  Backend& backend() const { return *backend_; }

  // Runs one step: writes every row's K/V into its sequence's blocks and
  // leaves, for the step's output rows, the final-normed hidden states in
  // act.hidden_out and (step.compute_logits) the soft-capped logits in
  // act.logits, both [R, ...] in backend memory (read them after a Sync).
  // REQUIRES: pool.PrepareAppend(seq, rows of seq) for every sequence;
  // afterwards the caller commits them (KvPool::Commit). Errors (a bad
  // step, a step larger than act's limits) leave the pool untouched.
  Status Forward(const StepBatch& step, KvPool& pool, Activations& act);

  // The per-layer inputs (PLE) of `ids` as [n, layers * P] floats on the
  // host; empty for models without PLE. A diagnostic (tests), not a step.
  StatusOr<std::vector<float>> PerLayerInputs(const std::vector<int32_t>& ids);

 private:
  Gemma4Model() = default;
  struct StepViews;
  void Upload(const StepBatch& step, const KvPool& pool, Activations& act, StepViews& sv) const;
  // The step's recording key (Backend::BeginCapture / Replay).
  uint64_t StepKey(const StepViews& sv, bool logits, const KvPool& pool, const Activations& act) const;
  void ComputePle(const StepViews& sv, Activations& act);
  void AttentionBlock(int l, const StepViews& sv, const KvPool& pool, Activations& act);
  void FeedForwardBlock(int l, const StepViews& sv, Activations& act);
  void PleBlock(int l, const StepViews& sv, Activations& act);
  // The feed-forward block's residual update (the layer's last unless a
  // per-layer-input block follows).
  void EndFeedForward(int l, const StepViews& sv, const TensorView& d, const float* post_weight);
  // A layer's last residual update: x = (x + norm(o)) * layer_scalar, and
  // the next layer's input norm into sv.a (none after the last layer).
  void EndLayer(int l, const StepViews& sv, const TensorView& o, const float* post_weight);
  // x = (x + RmsNorm(o, post_weight)) * scale; then, if next,
  // sv.a = RmsNorm(x, next_weight): one Ops::AddNorm. `product`: the
  // weights the op right after multiplies sv.a by (sv.x with product_of_x),
  // Ops::AddNorm's hint; null when the next op is not such a product.
  void ResidualUpdate(const StepViews& sv, const TensorView& o, const float* post_weight, float scale, bool next,
                      const float* next_weight, const WeightMatrix* product, bool product_of_x = false);
  void Head(const StepViews& sv, bool logits, Activations& act);

  Gemma4Config config_;
  std::unique_ptr<Gemma4Weights> weights_;
  Backend* backend_ = nullptr;
  DeviceBuffer inv_freq_sliding_, inv_freq_full_;  // [head_dim / 2] each, device
  float embed_scale_ = 1.0f;
};

}  // namespace g4
