// g4 quantize: Hugging Face Gemma 4 checkpoint -> MLX affine-quantized one,
// the layout mlx-community uploads use (what mlx-lm's converter writes), so
// g4 and MLX tools load the result alike.
//
// What is written to OUT_DIR:
//  - model.safetensors: tensor names "language_model.model.<module>"; every
//    matrix (Linear / Embedding, also stacked experts) whose input dimension
//    is a multiple of the group size becomes X.weight (u32 codes, LSB-first),
//    X.scales and X.biases (bf16); everything else (norm weights,
//    layer_scalar, router.scale, per_expert_scale, matrices whose input
//    dimension does not divide) is copied in its stored dtype. HF MoE
//    experts.gate_up_proj is split into experts.switch_glu.gate_proj /
//    up_proj, experts.down_proj becomes experts.switch_glu.down_proj. The
//    k/v/k_norm tensors of KV-shared layers, lm_head (tied), rotary buffers
//    and the vision / audio towers are dropped (g4 is text-only).
//  - config.json: the multimodal layout (model_type gemma4, the text fields
//    under text_config) with `quantization` and a copy `quantization_config`.
//    Each MoE router.proj gets an 8-bit group-64 override, as MLX-LM's
//    converter does.
//  - tokenizer.json, tokenizer_config.json, generation_config.json,
//    chat_template.jinja, special_tokens_map.json: copied when present.
//
// Scale and bias per group follow MLX's affine_quantize: with n = 2^bits - 1,
// s = max((max - min) / n, 1e-7); the extreme of larger magnitude ("edge")
// becomes the bias and s is nudged to edge / round(edge / s) (negated when
// edge is the max), so that 0 lands exactly on a code. Codes are
// round((w - bias) / scale) clipped to [0, n], computed against the stored
// (bf16-rounded) scale and bias so dequantization matches what was chosen.
// Every weight is then within one step |s| of its dequantized value, and
// within half a step unless its code was clipped at the far end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace g4 {

struct QuantizeOptions {
  int bits = 4;         // 2, 3, 4, 5, 6 or 8
  int group_size = 64;  // 32, 64 or 128
  // Called after each output tensor with the bytes of model.safetensors
  // written so far and its total (for a progress display); calling thread.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct QuantizeReport {
  int quantized = 0;     // matrices written as codes + scales + biases
  int kept = 0;          // tensors copied unchanged
  int dropped = 0;       // tensors left out (see above)
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;
};

// Reads IN_DIR (config.json + model.safetensors or a sharded index) and
// writes OUT_DIR (created if needed; an existing model.safetensors is
// replaced atomically, a stale model.safetensors.index.json removed).
// Errors start with "[quantize]"; an input that is already quantized is
// Unsupported.
StatusOr<QuantizeReport> QuantizeCheckpoint(const std::string& in_dir, const std::string& out_dir,
                                            const QuantizeOptions& options);

// One row of `cols` float weights -> packed codes (cols * bits / 32 words),
// and per group of `group_size` columns a bf16 scale and bias. `cols` must be
// a multiple of group_size, and group_size of 32. Exposed for tests.
void AffineQuantizeRow(const float* w, int64_t cols, int bits, int group_size, uint32_t* codes,
                       uint16_t* scales, uint16_t* biases);

}  // namespace g4
