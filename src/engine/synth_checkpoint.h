// Synthetic checkpoints: random weights at the real Gemma 4 shapes, for
// benchmarks and demos without downloading a model (g4 synth).
//
// Presets: "e2b", "e4b", "26b-a4b", "31b", "12b" use the published geometry
// (the text_config values of the released config.json files); "tiny" is a small E-style model
// (PLE, KV sharing of the last two layers, double-wide MLP on shared layers)
// and "tiny-moe" a small 26B-style one (MoE, K=V full layers); both keep the
// full 262144-token vocabulary so tokenizer ids stay valid.
//
// Layouts follow the real uploads so the loader's real paths are exercised:
//  - f32 / bf16: Hugging Face multimodal (prefix "model.language_model.",
//    experts.gate_up_proj [E, 2Ie, H] / experts.down_proj [E, H, Ie], no k/v
//    tensors on KV-shared layers).
//  - q4 / q8: MLX (prefix "language_model.model.", affine group 64, a
//    `quantization` block duplicated as `quantization_config`, router.proj
//    overridden to 8 bits as mlx-lm does, experts as
//    experts.switch_glu.{gate,up,down}_proj). Every matrix whose input dim
//    divides 64 is quantized; norms, layer_scalar and router scales stay bf16.
//
// Values are a pure function of (seed, tensor index, element index) through a
// counter-based RNG, so output is reproducible and filled in parallel. Weights
// have std ~0.02, norm weights are near 1, layer_scalar is 1; affine codes are
// uniform with scales chosen for std ~0.02 and biases -scale * 2^(bits-1).
// The model is streamed to disk one tensor at a time (peak memory is the
// largest single tensor, e.g. ~1.2 GB for E2B's q4 PLE table).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace g4 {

struct SynthOptions {
  std::string preset;          // one of SynthPresetNames()
  std::string quant = "bf16";  // f32 | bf16 | q4 | q8
  uint64_t seed = 0;
  std::string tokenizer_path;  // when set, copied to out_dir/tokenizer.json
  std::string out_dir;         // created if missing; existing files are replaced
  // Called after each tensor is written with the weight bytes written so
  // far and the total (for a progress display); on the calling thread.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct SynthSummary {
  std::string dir;
  uint64_t total_bytes = 0;        // every file written
  uint64_t safetensors_bytes = 0;  // model.safetensors alone
  uint64_t num_params = 0;         // logical weights (a quantized matrix counts rows x cols)
  size_t num_tensors = 0;          // stored tensors (a quantized matrix stores three)
};

std::vector<std::string> SynthPresetNames();

// The config.json text a preset/quant pair produces (validated by the config
// parser before anything is written).
StatusOr<std::string> SynthConfigJson(const std::string& preset, const std::string& quant);

// Writes config.json, generation_config.json, model.safetensors and (with a
// tokenizer_path) tokenizer.json into options.out_dir.
StatusOr<SynthSummary> SynthesizeCheckpoint(const SynthOptions& options);

}  // namespace g4
