// libFuzzer target: ParseGemma4Config and ParseGenerationConfig must turn any
// byte string into a Status or a config, never crash or throw, and every
// config they accept must satisfy the geometry invariants other modules rely
// on (section 2.4 / 2.5 of the architecture spec).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "io/config.h"

namespace {

void CheckInvariants(const g4::Gemma4Config& c) {
  if (c.num_hidden_layers <= 0 || c.layers.size() != static_cast<size_t>(c.num_hidden_layers)) __builtin_trap();
  if (c.layer_types.size() != c.layers.size()) __builtin_trap();
  if (c.layers.back().type != g4::AttentionType::kFull) __builtin_trap();
  const int first_shared = c.first_kv_shared_layer();
  if (first_shared < 0 || first_shared > c.num_hidden_layers) __builtin_trap();
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const g4::LayerGeometry& g = c.layers[l];
    if (g.type != c.layer_types[l]) __builtin_trap();
    if (g.head_dim <= 0 || g.head_dim % 2 != 0) __builtin_trap();
    if (g.num_kv_heads <= 0 || c.num_attention_heads % g.num_kv_heads != 0) __builtin_trap();
    if (g.mlp_width != c.intermediate_size && g.mlp_width != 2 * c.intermediate_size) __builtin_trap();
    if (g.kv_shared != (c.num_kv_shared_layers > 0 && static_cast<int>(l) >= first_shared)) __builtin_trap();
    if (g.kv_shared) {
      if (g.donor < 0 || g.donor >= first_shared) __builtin_trap();
      const g4::LayerGeometry& d = c.layers[g.donor];
      if (d.type != g.type || d.kv_shared || d.head_dim != g.head_dim || d.num_kv_heads != g.num_kv_heads) {
        __builtin_trap();
      }
    } else if (g.donor != -1) {
      __builtin_trap();
    }
  }
  if (c.sliding_window < 0 || c.vocab_size <= 0 || c.hidden_size <= 0) __builtin_trap();
  if (c.enable_moe_block && (c.top_k_experts <= 0 || c.top_k_experts > c.num_experts)) __builtin_trap();
  for (int id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) __builtin_trap();
  }
  if (c.quantization.present) {
    for (const auto& [name, spec] : c.quantization.overrides) {
      if (c.quantization.Override(name) != &spec) __builtin_trap();
      if (spec.quantized && (spec.bits < 2 || spec.bits > 8 || spec.group_size < 32)) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = g4::ParseGemma4Config(text);
  if (config.ok()) {
    CheckInvariants(*config);
  } else if (config.status().message().rfind("[config] ", 0) != 0) {
    __builtin_trap();  // every error names the module
  }
  auto generation = g4::ParseGenerationConfig(text);
  if (!generation.ok() && generation.status().message().rfind("[generation_config] ", 0) != 0) __builtin_trap();
  return 0;
}
