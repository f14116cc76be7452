// A small Gemma 4 geometry for the KV fuzz targets: sliding and full layers
// with different head sizes and two KV-shared layers, like the tiny-e
// fixture (testdata/models/tiny-e), but built in (the targets read no files).
#pragma once

#include <cstdlib>

#include "io/config.h"

namespace g4::fuzz {

inline Gemma4Config SmallKvConfig() {
  static const char kJson[] = R"({
    "model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 6, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 32, "global_head_dim": 64, "num_kv_shared_layers": 2,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "full_attention"],
    "sliding_window": 8, "max_position_embeddings": 4096, "vocab_size": 512,
    "rms_norm_eps": 1e-6, "final_logit_softcapping": 30.0,
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true,
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    "rope_parameters": {
      "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}})";
  auto c = ParseGemma4Config(kJson);
  if (!c.ok()) std::abort();  // the harness itself is broken
  return *c;
}

}  // namespace g4::fuzz
