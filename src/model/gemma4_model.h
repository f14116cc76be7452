// Gemma4Model: the Gemma 4 text decoder, written once over the Ops interface
// (shared docs gemma4-architecture.md section 3). It owns the weights (views
// into the mapped checkpoint) and the RoPE tables; per-sequence state lives
// in SequenceKv, so one model serves many sequences.
//
// Threading: Forward is not re-entrant (it reuses scratch buffers); callers
// serialize calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"
#include "io/config.h"
#include "io/gemma4_weights.h"
#include "kv/sequence_kv.h"

namespace g4 {

class Gemma4Model {
 public:
  // Loads DIR/config.json and the checkpoint in DIR. `ops` must outlive the model.
  static StatusOr<std::unique_ptr<Gemma4Model>> Load(const std::string& dir, Ops* ops);

  const Gemma4Config& config() const { return config_; }
  const Gemma4Weights& weights() const { return *weights_; }
  int vocab_size() const { return config_.vocab_size; }

  // Runs `n` tokens through the model at positions kv.position() ..., appends
  // their K/V to `kv` and advances it. Writes logits [n, V] (all_logits) or
  // [1, V] for the last token only. Token ids outside the vocabulary are an
  // InvalidArgument error and leave `kv` untouched.
  Status Forward(const int32_t* ids, int64_t n, SequenceKv& kv, float* logits, bool all_logits);

  // The per-layer inputs (PLE) for `ids`: [n, num_layers * P] into `out`.
  // Empty for models without PLE.
  Status PerLayerInputs(const int32_t* ids, int64_t n, std::vector<float>* out);

  // As Forward, in chunks of at most `chunk` tokens (chunked prefill).
  Status ForwardChunked(const int32_t* ids, int64_t n, int64_t chunk, SequenceKv& kv, float* logits,
                        bool all_logits);

 private:
  Gemma4Model() = default;
  void ComputePle(const int32_t* ids, int64_t n);
  void AttentionBlock(int l, int64_t n, std::vector<KvView>& views, SequenceKv& kv);
  void DenseMlp(const LayerWeights& lw, int width, const float* in, int64_t n, float* out);
  void FeedForwardBlock(int l, int64_t n);
  void PleBlock(int l, int64_t n);

  Gemma4Config config_;
  std::unique_ptr<Gemma4Weights> weights_;
  Ops* ops_ = nullptr;
  std::vector<float> inv_freq_sliding_, inv_freq_full_;
  float embed_scale_ = 1.0f;

  // Scratch, sized for the current chunk.
  struct Scratch {
    std::vector<int32_t> pos;
    std::vector<float> x, a, q, k, v, attn, o, g, u, d, d2, ple, pli_l, z, router, logits_rows;
  } s_;
};

}  // namespace g4
