// Gemma4Config parsing: the six fixture configs and the published variants
// of spec section 2.3, checked against the derived tables of 2.3 / 2.5.
// Validation errors and generation_config are in config_errors_test.cc.
#include "io/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;

std::vector<int> FullLayers(const Gemma4Config& c) {
  std::vector<int> out;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    if (c.layers[l].type == AttentionType::kFull) out.push_back(static_cast<int>(l));
  }
  return out;
}

std::vector<int> SharedLayers(const Gemma4Config& c) {
  std::vector<int> out;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    if (c.layers[l].kv_shared) out.push_back(static_cast<int>(l));
  }
  return out;
}

Gemma4Config LoadFixture(const std::string& name) {
  StatusOr<Gemma4Config> c = LoadGemma4Config(testing::TestDataPath("models/" + name));
  EXPECT_TRUE(c.ok()) << name << ": " << c.status().ToString();
  return c.ok() ? *c : Gemma4Config{};
}

void ExpectSameGeometry(const Gemma4Config& a, const Gemma4Config& b, bool compare_mlp = true) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_EQ(a.layers[l].type, b.layers[l].type);
    EXPECT_EQ(a.layers[l].head_dim, b.layers[l].head_dim);
    EXPECT_EQ(a.layers[l].num_kv_heads, b.layers[l].num_kv_heads);
    EXPECT_EQ(a.layers[l].k_eq_v, b.layers[l].k_eq_v);
    EXPECT_EQ(a.layers[l].kv_shared, b.layers[l].kv_shared);
    EXPECT_EQ(a.layers[l].donor, b.layers[l].donor);
    if (compare_mlp) {
      EXPECT_EQ(a.layers[l].mlp_width, b.layers[l].mlp_width);
    }
  }
}

// ---------------------------------------------------------------- fixtures

TEST(ConfigFixtures, TinyDense) {
  Gemma4Config c = LoadFixture("tiny-dense");
  EXPECT_EQ(c.model_type, "gemma4_text");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_FALSE(c.has_ple());
  EXPECT_FALSE(c.enable_moe_block);
  EXPECT_FALSE(c.quantization.present);
  EXPECT_DOUBLE_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>({1}));
  ASSERT_EQ(c.layers.size(), 6u);
  EXPECT_EQ(FullLayers(c), std::vector<int>({5}));
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(c.layers[l].head_dim, 32);
    EXPECT_EQ(c.layers[l].num_kv_heads, 2);
    EXPECT_FALSE(c.layers[l].k_eq_v);
  }
  // per_layer_config "5": {head_dim 64, num_key_value_heads 1}, K=V model.
  EXPECT_EQ(c.layers[5].head_dim, 64);
  EXPECT_EQ(c.layers[5].num_kv_heads, 1);
  EXPECT_TRUE(c.layers[5].k_eq_v);
  EXPECT_EQ(c.global_head_dim, 64);
  EXPECT_EQ(c.num_global_key_value_heads, 1);
  for (const LayerGeometry& g : c.layers) {
    EXPECT_FALSE(g.kv_shared);
    EXPECT_EQ(g.donor, -1);
    EXPECT_EQ(g.mlp_width, 256);
  }
  EXPECT_EQ(c.rope_sliding.type, RopeParams::Type::kDefault);
  EXPECT_DOUBLE_EQ(c.rope_sliding.theta, 10000.0);
  EXPECT_EQ(c.rope_full.type, RopeParams::Type::kProportional);
  EXPECT_DOUBLE_EQ(c.rope_full.theta, 1000000.0);
  EXPECT_DOUBLE_EQ(c.rope_full.partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(c.rope_full.factor, 1.0);
}

TEST(ConfigFixtures, TinyEKvSharing) {
  Gemma4Config c = LoadFixture("tiny-e");
  ASSERT_EQ(c.num_hidden_layers, 8);
  EXPECT_EQ(c.num_kv_shared_layers, 3);
  EXPECT_EQ(c.first_kv_shared_layer(), 5);
  EXPECT_TRUE(c.has_ple());
  EXPECT_EQ(c.hidden_size_per_layer_input, 16);
  EXPECT_EQ(c.vocab_size_per_layer_input, 512);
  EXPECT_EQ(FullLayers(c), std::vector<int>({3, 7}));
  EXPECT_EQ(SharedLayers(c), std::vector<int>({5, 6, 7}));
  // Donors: largest j < 5 of the same type -> sliding 4, full 3.
  EXPECT_EQ(c.layers[5].donor, 4);
  EXPECT_EQ(c.layers[6].donor, 4);
  EXPECT_EQ(c.layers[7].donor, 3);
  for (int l = 0; l < 8; ++l) {
    SCOPED_TRACE(l);
    const bool full = l == 3 || l == 7;
    EXPECT_EQ(c.layers[l].head_dim, full ? 64 : 32);
    EXPECT_EQ(c.layers[l].num_kv_heads, 2);  // not K=V: no KV override on full layers
    EXPECT_FALSE(c.layers[l].k_eq_v);
    EXPECT_EQ(c.layers[l].mlp_width, 256);  // use_double_wide_mlp false
    if (l < 5) {
      EXPECT_EQ(c.layers[l].donor, -1);
    }
  }
}

TEST(ConfigFixtures, TinyEQ4NestedMatchesTinyEAndHasQuantization) {
  Gemma4Config flat = LoadFixture("tiny-e");
  Gemma4Config c = LoadFixture("tiny-e-q4");
  EXPECT_EQ(c.model_type, "gemma4_text");
  EXPECT_EQ(c.global_head_dim, 64);
  // global_head_dim form and per_layer_config form describe the same model.
  ExpectSameGeometry(flat, c);
  const QuantizationConfig& q = c.quantization;
  ASSERT_TRUE(q.present);
  EXPECT_TRUE(q.defaults.quantized);
  EXPECT_EQ(q.defaults.bits, 4);
  EXPECT_EQ(q.defaults.group_size, 64);
  EXPECT_EQ(q.defaults.mode, "affine");
  EXPECT_EQ(q.overrides.size(), 2u);
  const QuantSpec* qp = q.Override("language_model.model.layers.0.self_attn.q_proj");
  ASSERT_NE(qp, nullptr);
  EXPECT_TRUE(qp->quantized);
  EXPECT_EQ(qp->bits, 8);
  EXPECT_EQ(qp->group_size, 64);
  const QuantSpec* down = q.Override("language_model.model.layers.3.mlp.down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->bits, 8);
  EXPECT_EQ(down->group_size, 32);
  EXPECT_EQ(q.Override("language_model.model.layers.1.self_attn.q_proj"), nullptr);
}

TEST(ConfigFixtures, TinyE2DoubleWideAndTopLevelEos) {
  Gemma4Config c = LoadFixture("tiny-e2");
  ASSERT_EQ(c.num_hidden_layers, 10);
  EXPECT_EQ(FullLayers(c), std::vector<int>({4, 9}));
  EXPECT_EQ(SharedLayers(c), std::vector<int>({6, 7, 8, 9}));
  // first_shared = 10 - 4 = 6: sliding donor 5, full donor 4.
  EXPECT_EQ(c.layers[6].donor, 5);
  EXPECT_EQ(c.layers[7].donor, 5);
  EXPECT_EQ(c.layers[8].donor, 5);
  EXPECT_EQ(c.layers[9].donor, 4);
  for (int l = 0; l < 10; ++l) {
    EXPECT_EQ(c.layers[l].mlp_width, l >= 6 ? 512 : 256) << l;
    EXPECT_EQ(c.layers[l].num_kv_heads, 1) << l;
    EXPECT_EQ(c.layers[l].head_dim, (l == 4 || l == 9) ? 64 : 32) << l;
  }
  // text_config says 1, the top level [1, 106]: both stop generation.
  EXPECT_EQ(c.eos_token_ids, std::vector<int>({1, 106}));
  EXPECT_FALSE(c.quantization.present);
}

TEST(ConfigFixtures, TinyMoe) {
  Gemma4Config c = LoadFixture("tiny-moe");
  EXPECT_TRUE(c.enable_moe_block);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.top_k_experts, 2);
  EXPECT_EQ(c.moe_intermediate_size, 64);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(FullLayers(c), std::vector<int>({2, 5}));
  for (int l = 0; l < 6; ++l) {
    const bool full = l == 2 || l == 5;
    EXPECT_EQ(c.layers[l].head_dim, full ? 64 : 32) << l;
    EXPECT_EQ(c.layers[l].num_kv_heads, full ? 1 : 2) << l;
    EXPECT_EQ(c.layers[l].k_eq_v, full) << l;
    EXPECT_EQ(c.layers[l].mlp_width, 96) << l;
    EXPECT_FALSE(c.layers[l].kv_shared) << l;
  }
}

TEST(ConfigFixtures, TinyMoeQ4MixedPrecisionOverrides) {
  Gemma4Config c = LoadFixture("tiny-moe-q4");
  // Same attention as tiny-moe (global_* form instead of per_layer_config),
  // but its own intermediate_size.
  ExpectSameGeometry(LoadFixture("tiny-moe"), c, /*compare_mlp=*/false);
  EXPECT_EQ(c.intermediate_size, 128);
  for (const LayerGeometry& g : c.layers) EXPECT_EQ(g.mlp_width, 128);
  const QuantizationConfig& q = c.quantization;
  ASSERT_TRUE(q.present);
  EXPECT_EQ(q.overrides.size(), 8u);
  for (int l = 0; l < 6; ++l) {
    const QuantSpec* r = q.Override("language_model.model.layers." + std::to_string(l) + ".router.proj");
    ASSERT_NE(r, nullptr) << l;
    EXPECT_EQ(r->bits, 8);
    EXPECT_EQ(r->group_size, 64);
  }
  const QuantSpec* up = q.Override("language_model.model.layers.1.mlp.up_proj");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->bits, 3);
  EXPECT_EQ(up->group_size, 32);
  const QuantSpec* o = q.Override("language_model.model.layers.2.self_attn.o_proj");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->bits, 6);
}

TEST(ConfigFixtures, AllFixturesAgreeWithTheirOwnLayerTypes) {
  // Cross-check against the raw JSON: types, and one geometry entry per layer.
  for (const std::string& name : testing::kFixtureModels) {
    SCOPED_TRACE(name);
    StatusOr<std::string> text =
        ReadFileToString(testing::TestDataPath(std::string("models/") + name + "/config.json"));
    ASSERT_TRUE(text.ok());
    json raw = json::parse(*text);
    const json& t = raw.contains("text_config") ? raw["text_config"] : raw;
    StatusOr<Gemma4Config> c = ParseGemma4Config(*text);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ(c->layers.size(), t["layer_types"].size());
    for (size_t l = 0; l < c->layers.size(); ++l) {
      const bool full = t["layer_types"][l] == "full_attention";
      EXPECT_EQ(c->layers[l].type == AttentionType::kFull, full) << l;
      if (!full) {
        EXPECT_EQ(c->layers[l].head_dim, t["head_dim"].get<int>()) << l;
      }
    }
  }
}

// ------------------------------------------------- published (section 2.3)

struct Published {
  int hidden, layers, heads, kv, global_kv, intermediate, ple, shared, window, max_pos;
  bool k_eq_v, double_wide;
};

// The text config of a released checkpoint, from the table in section 2.3.
json TextConfig(const Published& p) {
  json t = {
      {"model_type", "gemma4_text"},
      {"hidden_size", p.hidden},
      {"intermediate_size", p.intermediate},
      {"num_hidden_layers", p.layers},
      {"num_attention_heads", p.heads},
      {"num_key_value_heads", p.kv},
      {"head_dim", 256},
      {"global_head_dim", 512},
      {"attention_k_eq_v", p.k_eq_v},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", 1e-6},
      {"sliding_window", p.window},
      {"final_logit_softcapping", 30.0},
      {"hidden_size_per_layer_input", p.ple},
      {"vocab_size_per_layer_input", 262144},
      {"num_kv_shared_layers", p.shared},
      {"use_double_wide_mlp", p.double_wide},
      {"enable_moe_block", false},
      {"num_experts", nullptr},
      {"top_k_experts", nullptr},
      {"moe_intermediate_size", nullptr},
      {"max_position_embeddings", p.max_pos},
      {"tie_word_embeddings", true},
      {"eos_token_id", 1},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention",
         {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}}},
  };
  if (p.global_kv > 0) t["num_global_key_value_heads"] = p.global_kv;
  return t;
}

// Layer types as released: `period - 1` sliding layers then one full.
json LayerTypes(int n, int period) {
  json a = json::array();
  for (int l = 0; l < n; ++l) a.push_back((l + 1) % period == 0 ? "full_attention" : "sliding_attention");
  return a;
}

json Wrap(const json& text, const char* top_type) {
  return {{"model_type", top_type},
          {"architectures", {"Gemma4ForConditionalGeneration"}},
          {"text_config", text},
          {"vocab_size", 262144},
          {"tie_word_embeddings", true},
          {"eos_token_id", {1, 106}}};
}

const Published kE2B{1536, 35, 8, 1, 0, 6144, 256, 20, 512, 131072, false, true};
const Published kE4B{2560, 42, 8, 2, 0, 10240, 256, 18, 512, 131072, false, false};
const Published k26B{2816, 30, 16, 8, 2, 2112, 0, 0, 1024, 262144, true, false};
const Published k31B{5376, 60, 32, 16, 4, 21504, 0, 0, 1024, 262144, true, false};
const Published k12B{3840, 48, 16, 8, 1, 15360, 0, 0, 1024, 262144, true, false};

void ExpectKvHeads(const Gemma4Config& c, int sliding_kv, int full_kv) {
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerGeometry& g = c.layers[l];
    const bool full = g.type == AttentionType::kFull;
    EXPECT_EQ(g.num_kv_heads, full ? full_kv : sliding_kv) << l;
    EXPECT_EQ(g.head_dim, full ? 512 : 256) << l;
    EXPECT_EQ(g.k_eq_v, full && c.attention_k_eq_v) << l;
  }
}

TEST(ConfigPublished, E2BNested) {
  json text = TextConfig(kE2B);
  text["layer_types"] = LayerTypes(35, 5);
  json cfg = Wrap(text, "gemma4");
  cfg["text_config"].erase("eos_token_id");  // some uploads keep it only at the top
  Gemma4Config c = testing::ParseConfigOk(cfg);
  EXPECT_EQ(c.model_type, "gemma4_text");
  EXPECT_EQ(c.vocab_size, 262144);  // from the top level
  EXPECT_EQ(c.eos_token_ids, std::vector<int>({1, 106}));
  EXPECT_EQ(FullLayers(c), std::vector<int>({4, 9, 14, 19, 24, 29, 34}));
  ExpectKvHeads(c, 1, 1);
  EXPECT_TRUE(c.has_ple());
  // Section 2.5: layers 0-14 own K/V (12 sliding + 3 full), 15-34 shared.
  EXPECT_EQ(c.first_kv_shared_layer(), 15);
  int own_sliding = 0, own_full = 0;
  for (int l = 0; l < 35; ++l) {
    const LayerGeometry& g = c.layers[l];
    EXPECT_EQ(g.kv_shared, l >= 15) << l;
    if (!g.kv_shared) (g.type == AttentionType::kFull ? own_full : own_sliding)++;
    if (g.kv_shared) {
      EXPECT_EQ(g.donor, g.type == AttentionType::kFull ? 14 : 13) << l;
    }
    // Section 2.3: MLP width 6144 on layers 0-14, 12288 on 15-34.
    EXPECT_EQ(g.mlp_width, l <= 14 ? 6144 : 12288) << l;
  }
  EXPECT_EQ(own_sliding, 12);
  EXPECT_EQ(own_full, 3);
  // Section 2.4 example: E2B full layer q_proj [4096, 1536], k_proj [512, 1536].
  EXPECT_EQ(c.num_attention_heads * c.layers[4].head_dim, 4096);
  EXPECT_EQ(c.layers[4].num_kv_heads * c.layers[4].head_dim, 512);
}

TEST(ConfigPublished, E2BFromSlidingWindowPattern) {
  json text = TextConfig(kE2B);
  text["sliding_window_pattern"] = 5;  // MLX-style, no layer_types
  Gemma4Config c = testing::ParseConfigOk(Wrap(text, "gemma4"));
  EXPECT_EQ(FullLayers(c), std::vector<int>({4, 9, 14, 19, 24, 29, 34}));
}

TEST(ConfigPublished, E4BFlatWithDefaultLayerPattern) {
  json text = TextConfig(kE4B);  // flat gemma4_text, layer_types left to the HF default
  text["vocab_size"] = 262144;
  Gemma4Config c = testing::ParseConfigOk(text);
  EXPECT_EQ(FullLayers(c), std::vector<int>({5, 11, 17, 23, 29, 35, 41}));
  ExpectKvHeads(c, 2, 2);
  EXPECT_EQ(c.first_kv_shared_layer(), 24);
  int own_sliding = 0, own_full = 0;
  for (int l = 0; l < 42; ++l) {
    const LayerGeometry& g = c.layers[l];
    EXPECT_EQ(g.kv_shared, l >= 24) << l;
    if (!g.kv_shared) (g.type == AttentionType::kFull ? own_full : own_sliding)++;
    if (g.kv_shared) {
      EXPECT_EQ(g.donor, g.type == AttentionType::kFull ? 23 : 22) << l;
    }
    EXPECT_EQ(g.mlp_width, 10240) << l;
  }
  EXPECT_EQ(own_sliding, 20);
  EXPECT_EQ(own_full, 4);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>({1}));
}

TEST(ConfigPublished, Moe26BNested) {
  json text = TextConfig(k26B);
  text["layer_types"] = LayerTypes(30, 6);
  text["enable_moe_block"] = true;
  text["num_experts"] = 128;
  text["top_k_experts"] = 8;
  text["moe_intermediate_size"] = 704;
  text["use_bidirectional_attention"] = "vision";
  Gemma4Config c = testing::ParseConfigOk(Wrap(text, "gemma4"));
  EXPECT_EQ(FullLayers(c), std::vector<int>({5, 11, 17, 23, 29}));
  ExpectKvHeads(c, 8, 2);
  EXPECT_TRUE(c.enable_moe_block);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.top_k_experts, 8);
  EXPECT_EQ(c.moe_intermediate_size, 704);
  EXPECT_FALSE(c.has_ple());
  EXPECT_TRUE(SharedLayers(c).empty());
  for (const LayerGeometry& g : c.layers) EXPECT_EQ(g.mlp_width, 2112);
  // mlx-bun's GQA ratios (section 2.3): 2 on sliding, 8 on full layers.
  EXPECT_EQ(c.num_attention_heads / c.layers[0].num_kv_heads, 2);
  EXPECT_EQ(c.num_attention_heads / c.layers[5].num_kv_heads, 8);
}

TEST(ConfigPublished, Dense31BFlatGemma4TextOnlyConversion) {
  json text = TextConfig(k31B);
  text["layer_types"] = LayerTypes(60, 6);
  text["model_type"] = "gemma4";  // MLX text-only conversion: text fields at the top
  text["vocab_size"] = 262144;
  Gemma4Config c = testing::ParseConfigOk(text);
  EXPECT_EQ(c.model_type, "gemma4_text");
  std::vector<int> expected_full;
  for (int l = 5; l < 60; l += 6) expected_full.push_back(l);
  EXPECT_EQ(FullLayers(c), expected_full);
  ExpectKvHeads(c, 16, 4);
  for (const LayerGeometry& g : c.layers) EXPECT_EQ(g.mlp_width, 21504);
  // Section 2.4 example: 31B full layer q_proj [16384, 5376], k_proj [2048, 5376].
  EXPECT_EQ(c.num_attention_heads * c.layers[5].head_dim, 16384);
  EXPECT_EQ(c.layers[5].num_kv_heads * c.layers[5].head_dim, 2048);
}

TEST(ConfigPublished, Unified12BWithPerLayerConfig) {
  json text = TextConfig(k12B);
  text["model_type"] = "gemma4_unified_text";
  text["layer_types"] = LayerTypes(48, 6);
  // transformers >= 5.15 layout: per-layer overrides instead of global_*.
  text.erase("global_head_dim");
  text.erase("num_global_key_value_heads");
  json plc = json::object();
  for (int l = 5; l < 48; l += 6) plc[std::to_string(l)] = {{"head_dim", 512}, {"num_key_value_heads", 1}};
  text["per_layer_config"] = plc;
  Gemma4Config c = testing::ParseConfigOk(Wrap(text, "gemma4_unified"));
  EXPECT_EQ(c.model_type, "gemma4_unified_text");
  std::vector<int> expected_full;
  for (int l = 5; l < 48; l += 6) expected_full.push_back(l);
  EXPECT_EQ(FullLayers(c), expected_full);
  ExpectKvHeads(c, 8, 1);
  EXPECT_EQ(c.global_head_dim, 512);
  EXPECT_EQ(c.num_global_key_value_heads, 1);
  // mlx-bun: 12B nRep = 2 (sliding) and 16 (full).
  EXPECT_EQ(c.num_attention_heads / c.layers[0].num_kv_heads, 2);
  EXPECT_EQ(c.num_attention_heads / c.layers[5].num_kv_heads, 16);
  for (const LayerGeometry& g : c.layers) EXPECT_EQ(g.mlp_width, 15360);
}

TEST(ConfigPublished, PerLayerConfigAndGlobalFieldsGiveTheSameGeometry) {
  for (const Published* p : {&kE2B, &kE4B, &k26B, &k31B, &k12B}) {
    json text = TextConfig(*p);
    text["vocab_size"] = 262144;
    const int period = p == &kE2B ? 5 : 6;
    text["layer_types"] = LayerTypes(p->layers, period);
    if (p == &k26B) {
      text["enable_moe_block"] = true;
      text["num_experts"] = 128;
      text["top_k_experts"] = 8;
      text["moe_intermediate_size"] = 704;
    }
    Gemma4Config global_form = testing::ParseConfigOk(text);
    json plc = json::object();
    for (int l = 0; l < p->layers; ++l) {
      if ((l + 1) % period != 0) continue;
      plc[std::to_string(l)] = {{"head_dim", 512}};
      if (p->k_eq_v) plc[std::to_string(l)]["num_key_value_heads"] = p->global_kv;
    }
    text.erase("global_head_dim");
    text.erase("num_global_key_value_heads");
    text["per_layer_config"] = plc;
    ExpectSameGeometry(global_form, testing::ParseConfigOk(text));
  }
}

}  // namespace
}  // namespace g4
