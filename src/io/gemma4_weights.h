// Gemma4Weights: every tensor of the Gemma 4 text model, resolved by name in a
// checkpoint and checked against the config's geometry. Matrices are views
// into the checkpoint mapping (dense or MLX affine-packed, never dequantized);
// the small vectors (norm weights, scalars, router scales) are converted to
// float32 copies, which cost O(layers x hidden) floats.
//
// Names (shared docs gemma4-architecture.md 4.1, 4.2): prefix
// "model.language_model." (HF multimodal), "language_model.model." (MLX
// multimodal) or "model." (text-only); towers and the k/v tensors of
// KV-shared layers are ignored; HF experts.gate_up_proj [E, 2Ie, H] is split
// into gate and up row views; MLX experts.switch_glu.{gate,up,down}_proj are
// used as stored.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "io/weight_matrix.h"

namespace g4 {

struct LayerWeights {
  const float* input_layernorm = nullptr;
  const float* post_attention_layernorm = nullptr;
  const float* pre_feedforward_layernorm = nullptr;
  const float* post_feedforward_layernorm = nullptr;
  float layer_scalar = 1.0f;

  WeightMatrix q_proj, k_proj, v_proj, o_proj;  // k/v empty (rows 0) when not owned; v empty when K=V
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  int64_t q_norm_size = 0;  // head_dim: the length of q_norm and k_norm

  WeightMatrix gate_proj, up_proj, down_proj;  // dense MLP (26B: the shared-expert branch)

  // PLE (has_ple)
  WeightMatrix per_layer_input_gate, per_layer_projection;
  const float* post_per_layer_input_norm = nullptr;

  // MoE (enable_moe_block)
  WeightMatrix router_proj;
  const float* router_scale = nullptr;       // [H]
  const float* per_expert_scale = nullptr;   // [E]
  std::vector<WeightMatrix> expert_gate, expert_up, expert_down;  // per expert
  const float* pre_feedforward_layernorm_2 = nullptr;
  const float* post_feedforward_layernorm_1 = nullptr;
  const float* post_feedforward_layernorm_2 = nullptr;
};

class Gemma4Weights {
 public:
  // Resolves every tensor the config needs. Errors name the tensor:
  // "[weights] missing tensor model.layers.9.self_attn.q_proj.weight" or
  // "[weights] model.norm.weight: shape [64] but config implies [128]".
  // Also checks that every vector and a sample of rows of every matrix
  // (affine scales and biases included) are finite (io/weights_check.h).
  static StatusOr<std::unique_ptr<Gemma4Weights>> Load(const Gemma4Config& config,
                                                       std::unique_ptr<Checkpoint> checkpoint);

  WeightMatrix embed_tokens;                 // [V, H]; also the LM head when tied
  // [V, H]: the untied LM head (config tie_word_embeddings false), found as
  // lm_head / language_model.lm_head / model.language_model.lm_head; empty
  // (rows 0) when tied. Logits use lm_head.rows ? lm_head : embed_tokens.
  WeightMatrix lm_head;
  const float* final_norm = nullptr;         // [H]
  WeightMatrix embed_tokens_per_layer;       // [V_ple, N*P]  (PLE)
  WeightMatrix per_layer_model_projection;   // [N*P, H]      (PLE)
  const float* per_layer_projection_norm = nullptr;  // [P] (PLE)
  std::vector<LayerWeights> layers;

  // Every tensor, once, for whole-model passes (Backend::PlaceWeights
  // uploads and repoints them): matrices as mutable views, float vectors as
  // mutable pointers with their length. Empty matrices (rows 0) and absent
  // vectors (null) are skipped. Names are relative ("layers.3.q_proj").
  using MatrixVisitor = std::function<void(const std::string& name, WeightMatrix& m)>;
  using VectorVisitor = std::function<void(const std::string& name, const float*& data, int64_t n)>;
  void ForEachTensor(const MatrixVisitor& matrix, const VectorVisitor& vector);

  const std::string& prefix() const { return prefix_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  // Bytes of weights one decode step reads: every matrix once, except the
  // embedding tables (one row each) and unrouted experts (top_k of E).
  size_t DecodeBytesPerToken(const Gemma4Config& config) const;

 private:
  std::unique_ptr<Checkpoint> checkpoint_;
  std::string prefix_;
  int64_t hidden_size_ = 0;
  int64_t ple_width_ = 0;
  std::deque<std::vector<float>> vectors_;  // owned float copies; deque keeps pointers stable
  friend class WeightResolver;
};

}  // namespace g4
