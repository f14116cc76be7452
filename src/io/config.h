// Gemma 4 text configuration: parsed from config.json once, validated, and
// expanded into per-layer geometry (head dim, KV heads, K=V, KV sharing and
// donors, MLP width) so no other code re-derives it.
// Spec: shared docs gemma4-architecture.md section 2.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace g4 {

enum class AttentionType { kSliding, kFull };

struct RopeParams {
  enum class Type { kDefault, kProportional };
  Type type = Type::kDefault;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;  // proportional only
  double factor = 1.0;                 // divides every inverse frequency
};

struct LayerGeometry {
  AttentionType type = AttentionType::kSliding;
  int head_dim = 0;        // D(l)
  int num_kv_heads = 0;    // nKV(l)
  bool k_eq_v = false;     // full layer of an attention_k_eq_v model: no v_proj
  bool kv_shared = false;  // owns no K/V; reads donor's
  int donor = -1;          // for kv_shared layers: the layer whose K/V it reads
  int mlp_width = 0;       // I or 2I (double-wide MLP on shared layers)
};

// One module's MLX quantization: absent (dense) or affine bits/group_size.
struct QuantSpec {
  bool quantized = false;
  int bits = 0;
  int group_size = 0;
  std::string mode = "affine";
};

// The MLX `quantization` block: defaults plus per-module overrides, keyed by
// module path without ".weight" (e.g. "language_model.model.layers.0.router.proj").
struct QuantizationConfig {
  bool present = false;
  QuantSpec defaults;
  std::map<std::string, QuantSpec> overrides;  // override with quantized=false means "not quantized"
  // The override for `module_path` if there is one ("X.weight" finds X too).
  const QuantSpec* Override(std::string_view module_path) const;
};

struct Gemma4Config {
  std::string model_type;  // gemma4_text / gemma4_unified_text (of the text config)
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int global_head_dim = 0;
  int num_global_key_value_heads = 0;  // 0 = unset
  bool attention_k_eq_v = false;
  double rms_norm_eps = 1e-6;
  int sliding_window = 0;
  std::vector<AttentionType> layer_types;
  RopeParams rope_sliding;
  RopeParams rope_full;
  double final_logit_softcapping = 0.0;  // 0 = none
  bool tie_word_embeddings = true;
  int hidden_size_per_layer_input = 0;  // 0 = no PLE
  int vocab_size_per_layer_input = 0;
  int num_kv_shared_layers = 0;
  bool use_double_wide_mlp = false;
  bool enable_moe_block = false;
  int num_experts = 0;
  int top_k_experts = 0;
  int moe_intermediate_size = 0;
  int max_position_embeddings = 0;
  std::string hidden_activation = "gelu_pytorch_tanh";
  int pad_token_id = 0;
  int bos_token_id = 2;
  std::vector<int> eos_token_ids;
  QuantizationConfig quantization;

  std::vector<LayerGeometry> layers;  // derived, one per layer

  bool has_ple() const { return hidden_size_per_layer_input > 0; }
  int first_kv_shared_layer() const { return num_hidden_layers - num_kv_shared_layers; }
  const RopeParams& rope(AttentionType t) const { return t == AttentionType::kFull ? rope_full : rope_sliding; }
};

// Parses config.json text: flat (gemma4_text / gemma4_unified_text, or a
// text-only conversion labelled gemma4 / gemma4_unified with the text fields at
// the top) or with a nested text_config (gemma4 / gemma4_unified). Errors name
// the offending field: `[config] num_hidden_layers: missing`; a valid feature
// g4 does not implement is kUnsupported, anything else kInvalidArgument.
//
// Resolution rules (where HF is the reference, HF's behaviour is followed):
// * Nested: the top level supplies vocab_size, tie_word_embeddings,
//   bos/pad_token_id when text_config lacks them; eos_token_ids is the union
//   of text_config's and the top level's (released IT configs say 1 inside
//   and [1, 106] outside; HF generation stops on the outer list).
// * layer_types absent: derived as HF does, (i+1) % 6 != 0 -> sliding, or
//   with sliding_window_pattern as the period if given. The last layer is
//   always made full (HF forces it too, even over an explicit list).
// * Full-layer geometry: with per_layer_config (object keyed by layer index,
//   or a list of N entries) its head_dim / num_key_value_heads override the
//   flat head_dim / num_key_value_heads per layer, and global_head_dim /
//   num_global_key_value_heads are ignored (as in HF); without it, full layers
//   use global_head_dim (required) and num_global_key_value_heads only when
//   attention_k_eq_v. After parsing, global_head_dim (and, for K=V models,
//   num_global_key_value_heads) reflect the first full layer either way.
// * RoPE: rope_parameters.{sliding_attention, full_attention}, rope_type
//   default or proportional. Without rope_parameters, the Gemma-3-style
//   rope_local_base_freq (sliding, default 1e4) and rope_theta (full,
//   proportional, default 1e6, partial from global_partial_rotary_factor or
//   partial_rotary_factor, default 0.25) are read.
// * Quantization: `quantization`, else `quantization_config`, at the top
//   level, else in text_config.
StatusOr<Gemma4Config> ParseGemma4Config(std::string_view json_text);
// Reads DIR/config.json; errors read "[config] DIR/config.json: ...".
StatusOr<Gemma4Config> LoadGemma4Config(const std::string& dir);

// generation_config.json (optional; defaults when absent).
struct GenerationConfig {
  bool present = false;
  std::vector<int> eos_token_ids;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<bool> do_sample;  // false: the model's authors meant greedy decoding
};
StatusOr<GenerationConfig> ParseGenerationConfig(std::string_view json_text);
// Reads DIR/generation_config.json; absent file gives present=false.
StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& dir);

}  // namespace g4
