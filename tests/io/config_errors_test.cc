// Config validation: every rejected input names its field; optional fields
// and alternative spellings that must be accepted; the quantization block;
// generation_config.json.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/config.h"
#include "io_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;

// A small valid flat config in the shape of testdata/models/tiny-e.
json Base() {
  return {
      {"model_type", "gemma4_text"},
      {"vocab_size", 512},
      {"hidden_size", 128},
      {"intermediate_size", 256},
      {"num_hidden_layers", 8},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"head_dim", 32},
      {"global_head_dim", 64},
      {"sliding_window", 8},
      {"layer_types",
       {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
        "sliding_attention", "sliding_attention", "full_attention"}},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}}},
      {"hidden_size_per_layer_input", 16},
      {"vocab_size_per_layer_input", 512},
      {"num_kv_shared_layers", 3},
      {"final_logit_softcapping", 30.0},
      {"eos_token_id", 1},
  };
}

Status ParseStatus(const std::string& text) {
  StatusOr<Gemma4Config> c = ParseGemma4Config(text);
  return c.ok() ? Status::Ok() : c.status();
}

struct ErrorCase {
  const char* what;
  std::function<void(json&)> mutate;
  StatusCode code;
  const char* message;  // must appear in the error
};

TEST(ConfigErrors, BaseIsValid) { testing::ParseConfigOk(Base()); }

TEST(ConfigErrors, EachInvalidFieldIsNamed) {
  using SC = StatusCode;
  const std::vector<ErrorCase> cases = {
      {"missing N", [](json& j) { j.erase("num_hidden_layers"); }, SC::kInvalidArgument,
       "[config] num_hidden_layers: missing"},
      {"layer_types length", [](json& j) { j["layer_types"].erase(0); }, SC::kInvalidArgument,
       "[config] layer_types: has 7 entries but num_hidden_layers is 8"},
      {"heads not multiple",
       [](json& j) {
         j["num_attention_heads"] = 6;
         j["num_key_value_heads"] = 4;
       },
       SC::kInvalidArgument, "[config] num_attention_heads (6) is not a multiple of num_key_value_heads (4)"},
      {"global kv not multiple",
       [](json& j) {
         j["attention_k_eq_v"] = true;
         j["num_global_key_value_heads"] = 3;
       },
       SC::kInvalidArgument, "[config] num_attention_heads (4) is not a multiple of num_global_key_value_heads (3)"},
      {"per-layer kv not multiple", [](json& j) {
         j.erase("global_head_dim");
         j["per_layer_config"] = {{"3", {{"head_dim", 64}, {"num_key_value_heads", 3}}}, {"7", {{"head_dim", 64}}}};
       },
       SC::kInvalidArgument, "is not a multiple of per_layer_config.3.num_key_value_heads (3)"},
      {"zero hidden", [](json& j) { j["hidden_size"] = 0; }, SC::kInvalidArgument,
       "[config] hidden_size: must be positive, got 0"},
      {"negative intermediate", [](json& j) { j["intermediate_size"] = -256; }, SC::kInvalidArgument,
       "[config] intermediate_size: must be positive, got -256"},
      {"zero vocab", [](json& j) { j["vocab_size"] = 0; }, SC::kInvalidArgument, "[config] vocab_size: must be positive"},
      {"zero kv heads", [](json& j) { j["num_key_value_heads"] = 0; }, SC::kInvalidArgument,
       "[config] num_key_value_heads: must be positive, got 0"},
      {"negative ple", [](json& j) { j["hidden_size_per_layer_input"] = -1; }, SC::kInvalidArgument,
       "[config] hidden_size_per_layer_input: must not be negative, got -1"},
      {"ple without its vocab", [](json& j) { j.erase("vocab_size_per_layer_input"); }, SC::kInvalidArgument,
       "[config] vocab_size_per_layer_input: missing"},
      {"zero window", [](json& j) { j["sliding_window"] = 0; }, SC::kInvalidArgument,
       "[config] sliding_window: must be positive, got 0"},
      {"negative window", [](json& j) { j["sliding_window"] = -8; }, SC::kInvalidArgument,
       "[config] sliding_window: must be positive, got -8"},
      {"missing window", [](json& j) { j.erase("sliding_window"); }, SC::kInvalidArgument,
       "[config] sliding_window: missing"},
      {"odd head_dim", [](json& j) { j["head_dim"] = 33; }, SC::kInvalidArgument, "[config] head_dim: must be even"},
      {"odd global_head_dim", [](json& j) { j["global_head_dim"] = 63; }, SC::kInvalidArgument,
       "[config] global_head_dim: must be even"},
      {"odd per-layer head_dim",
       [](json& j) {
         j.erase("global_head_dim");
         j["per_layer_config"] = {{"3", {{"head_dim", 65}}}, {"7", {{"head_dim", 64}}}};
       },
       SC::kInvalidArgument, "[config] per_layer_config.3.head_dim: must be even"},
      {"partial zero", [](json& j) { j["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 0; },
       SC::kInvalidArgument, "[config] rope_parameters.full_attention.partial_rotary_factor: must be in (0, 1], got 0"},
      {"partial above one", [](json& j) { j["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 1.5; },
       SC::kInvalidArgument, "[config] rope_parameters.full_attention.partial_rotary_factor: must be in (0, 1], got 1.5"},
      {"rope theta missing", [](json& j) { j["rope_parameters"]["sliding_attention"].erase("rope_theta"); },
       SC::kInvalidArgument, "[config] rope_parameters.sliding_attention.rope_theta: missing"},
      {"rope theta negative", [](json& j) { j["rope_parameters"]["sliding_attention"]["rope_theta"] = -1; },
       SC::kInvalidArgument, "[config] rope_parameters.sliding_attention.rope_theta: must be positive"},
      {"rope type yarn", [](json& j) { j["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; },
       SC::kUnsupported, "[config] rope_parameters.full_attention.rope_type: 'yarn' is not supported"},
      {"rope entry missing", [](json& j) { j["rope_parameters"].erase("full_attention"); }, SC::kInvalidArgument,
       "[config] rope_parameters.full_attention: missing"},
      {"rope not per type", [](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}}; },
       SC::kInvalidArgument, "[config] rope_parameters: expected one entry per layer type"},
      {"rope factor zero", [](json& j) { j["rope_parameters"]["full_attention"]["factor"] = 0; },
       SC::kInvalidArgument, "[config] rope_parameters.full_attention.factor: must be positive"},
      {"shared > N", [](json& j) { j["num_kv_shared_layers"] = 9; }, SC::kInvalidArgument,
       "[config] num_kv_shared_layers (9) is larger than num_hidden_layers (8)"},
      {"all layers shared", [](json& j) { j["num_kv_shared_layers"] = 8; }, SC::kInvalidArgument,
       "[config] num_kv_shared_layers: layer 0 (sliding_attention) shares K/V, but no layer before 0"},
      {"no full donor",
       [](json& j) {
         j["layer_types"][3] = "sliding_attention";
         j["num_kv_shared_layers"] = 1;
       },
       SC::kInvalidArgument, "layer 7 (full_attention) shares K/V, but no layer before 7 is full_attention"},
      {"unknown layer type", [](json& j) { j["layer_types"][2] = "local_attention"; }, SC::kInvalidArgument,
       "[config] layer_types[2]: unknown layer type 'local_attention'"},
      {"layer type not a string", [](json& j) { j["layer_types"][1] = 1; }, SC::kInvalidArgument,
       "[config] layer_types[1]: expected a layer type string, got number"},
      {"moe missing experts",
       [](json& j) {
         j["enable_moe_block"] = true;
         j["top_k_experts"] = 2;
         j["moe_intermediate_size"] = 64;
       },
       SC::kInvalidArgument, "[config] num_experts: missing"},
      {"moe missing width",
       [](json& j) {
         j["enable_moe_block"] = true;
         j["num_experts"] = 8;
         j["top_k_experts"] = 2;
         j["moe_intermediate_size"] = nullptr;
       },
       SC::kInvalidArgument, "[config] moe_intermediate_size: missing"},
      {"moe top_k > E",
       [](json& j) {
         j["enable_moe_block"] = true;
         j["num_experts"] = 8;
         j["top_k_experts"] = 9;
         j["moe_intermediate_size"] = 64;
       },
       SC::kInvalidArgument, "[config] top_k_experts (9) is larger than num_experts (8)"},
      {"activation", [](json& j) { j["hidden_activation"] = "silu"; }, SC::kUnsupported,
       "[config] hidden_activation: 'silu' is not supported"},
      {"bidirectional all", [](json& j) { j["use_bidirectional_attention"] = "all"; }, SC::kUnsupported,
       "[config] use_bidirectional_attention: 'all'"},
      {"attention bias", [](json& j) { j["attention_bias"] = true; }, SC::kUnsupported, "[config] attention_bias"},
      {"string for int", [](json& j) { j["hidden_size"] = "128"; }, SC::kInvalidArgument,
       "[config] hidden_size: expected an integer, got string"},
      {"fraction for int", [](json& j) { j["hidden_size"] = 3.5; }, SC::kInvalidArgument,
       "[config] hidden_size: expected an integer, got 3.5"},
      {"huge float for int", [](json& j) { j["hidden_size"] = 1e30; }, SC::kInvalidArgument,
       "[config] hidden_size: 1e+30 is too large"},
      {"huge unsigned", [](json& j) { j["num_hidden_layers"] = 18446744073709551615ull; }, SC::kInvalidArgument,
       "[config] num_hidden_layers: 18446744073709551615 is too large"},
      {"huge negative", [](json& j) { j["head_dim"] = INT64_MIN; }, SC::kInvalidArgument,
       "[config] head_dim: must be positive, got -9223372036854775808"},
      {"bool as string", [](json& j) { j["use_double_wide_mlp"] = "yes"; }, SC::kInvalidArgument,
       "[config] use_double_wide_mlp: expected true or false, got string"},
      {"negative softcap", [](json& j) { j["final_logit_softcapping"] = -1.0; }, SC::kInvalidArgument,
       "[config] final_logit_softcapping: must not be negative"},
      {"zero eps", [](json& j) { j["rms_norm_eps"] = 0; }, SC::kInvalidArgument, "[config] rms_norm_eps: must be positive"},
      {"eos out of vocab", [](json& j) { j["eos_token_id"] = {1, 600}; }, SC::kInvalidArgument,
       "[config] eos_token_id[1]: 600 is too large (at most 511)"},
      {"eos wrong type", [](json& j) { j["eos_token_id"] = "1"; }, SC::kInvalidArgument,
       "[config] eos_token_id: expected an integer or a list of integers"},
      {"model_type other", [](json& j) { j["model_type"] = "llama"; }, SC::kUnsupported,
       "[config] model_type: 'llama' is not a Gemma 4 model"},
      {"model_type missing", [](json& j) { j.erase("model_type"); }, SC::kInvalidArgument,
       "[config] model_type: missing"},
      {"no global head dim", [](json& j) { j.erase("global_head_dim"); }, SC::kInvalidArgument,
       "[config] global_head_dim: missing"},
      {"per_layer key", [](json& j) { j["per_layer_config"] = {{"x", {{"head_dim", 64}}}}; }, SC::kInvalidArgument,
       "[config] per_layer_config: key 'x' is not a layer index"},
      {"per_layer index", [](json& j) { j["per_layer_config"] = {{"8", {{"head_dim", 64}}}}; }, SC::kInvalidArgument,
       "[config] per_layer_config.8: layer index out of range (num_hidden_layers is 8)"},
      {"per_layer entry type", [](json& j) { j["per_layer_config"] = {{"3", 64}}; }, SC::kInvalidArgument,
       "[config] per_layer_config.3: expected an object, got number"},
      {"per_layer list length", [](json& j) { j["per_layer_config"] = json::array({nullptr}); },
       SC::kInvalidArgument, "[config] per_layer_config: has 1 entries but num_hidden_layers is 8"},
      {"per_layer other override", [](json& j) { j["per_layer_config"] = {{"3", {{"sliding_window", 4}}}}; },
       SC::kUnsupported, "[config] per_layer_config.3.sliding_window: per-layer override is not supported"},
      {"per_layer query heads", [](json& j) { j["per_layer_config"] = {{"3", {{"num_attention_heads", 8}}}}; },
       SC::kUnsupported, "[config] per_layer_config.3.num_attention_heads: 8 differs"},
      {"shared geometry differs from donor",
       [](json& j) {
         j.erase("global_head_dim");
         j["per_layer_config"] = {{"3", {{"head_dim", 64}}}, {"7", {{"head_dim", 128}}}};
       },
       SC::kInvalidArgument, "layer 7 reads the K/V of layer 3 but their head_dim"},
      {"legacy rope_scaling", [](json& j) {
         j.erase("rope_parameters");
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
       },
       SC::kUnsupported, "[config] rope_scaling: not supported"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.what);
    json j = Base();
    c.mutate(j);
    Status s = ParseStatus(j.dump());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
}

TEST(ConfigErrors, MalformedDocuments) {
  Status s = ParseStatus("{\"model_type\": ");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("[config] not valid JSON: ", 0), 0u) << s.message();
  s = ParseStatus("");
  EXPECT_EQ(s.message().rfind("[config] not valid JSON: ", 0), 0u) << s.message();
  s = ParseStatus("[1, 2]");
  EXPECT_NE(s.message().find("[config] expected a JSON object at the top level, got array"), std::string::npos);
  s = ParseStatus(R"({"model_type": "gemma4", "text_config": [1]})");
  EXPECT_NE(s.message().find("[config] text_config: expected an object, got array"), std::string::npos);
  s = ParseStatus(R"({"model_type": "gemma4", "text_config": {"model_type": "gemma3_text"}})");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("[config] text_config.model_type: 'gemma3_text'"), std::string::npos);
  // Deep nesting in an ignored field must neither crash nor be copied.
  std::string deep = R"({"junk": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  s = ParseStatus(deep);
  EXPECT_FALSE(s.ok());
}

TEST(ConfigErrors, LoadNamesThePath) {
  const std::string dir = testing::MakeTempDir();
  StatusOr<Gemma4Config> missing = LoadGemma4Config(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message().rfind("[config] ", 0), 0u);
  json j = Base();
  j.erase("hidden_size");
  std::ofstream(dir + "/config.json") << j.dump();
  StatusOr<Gemma4Config> bad = LoadGemma4Config(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "[config] " + dir + "/config.json: hidden_size: missing");
}

// ------------------------------------------------ accepted alternatives

TEST(ConfigAccepts, NullOptionalFields) {
  json j = Base();
  j["final_logit_softcapping"] = nullptr;
  j["hidden_size_per_layer_input"] = nullptr;
  j["num_experts"] = nullptr;
  j["hidden_activation"] = nullptr;
  Gemma4Config c = testing::ParseConfigOk(j);
  EXPECT_EQ(c.final_logit_softcapping, 0.0);
  EXPECT_FALSE(c.has_ple());
  j["hidden_size_per_layer_input"] = 0;
  j.erase("vocab_size_per_layer_input");
  EXPECT_FALSE(testing::ParseConfigOk(j).has_ple());
}

TEST(ConfigAccepts, EosIntOrList) {
  json j = Base();
  j["eos_token_id"] = 1;
  EXPECT_EQ(testing::ParseConfigOk(j).eos_token_ids, std::vector<int>({1}));
  j["eos_token_id"] = {1, 106, 50};
  EXPECT_EQ(testing::ParseConfigOk(j).eos_token_ids, std::vector<int>({1, 106, 50}));
  j.erase("eos_token_id");
  EXPECT_TRUE(testing::ParseConfigOk(j).eos_token_ids.empty());
}

TEST(ConfigAccepts, IntegralFloatsForInts) {
  json j = Base();
  j["hidden_size"] = 128.0;
  EXPECT_EQ(testing::ParseConfigOk(j).hidden_size, 128);
}

TEST(ConfigAccepts, DefaultLayerPatternForcesLastFull) {
  json j = Base();
  j.erase("layer_types");
  j["num_kv_shared_layers"] = 0;
  Gemma4Config c = testing::ParseConfigOk(j);
  // (i+1) % 6 != 0 -> sliding: layer 5 full; the last layer (7) forced full.
  ASSERT_EQ(c.layers.size(), 8u);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(c.layers[l].type == AttentionType::kFull, l == 5 || l == 7) << l;
  j["num_hidden_layers"] = 12;
  c = testing::ParseConfigOk(j);
  for (int l = 0; l < 12; ++l) EXPECT_EQ(c.layers[l].type == AttentionType::kFull, l == 5 || l == 11) << l;
  // An explicit list ending in a sliding layer is corrected the same way (HF).
  j = Base();
  j["layer_types"][7] = "sliding_attention";
  j["num_kv_shared_layers"] = 0;
  c = testing::ParseConfigOk(j);
  EXPECT_EQ(c.layers[7].type, AttentionType::kFull);
  EXPECT_EQ(c.layers[7].head_dim, 64);
}

TEST(ConfigAccepts, GlobalKvHeadsOnlyWithKEqV) {
  json j = Base();
  j["num_global_key_value_heads"] = 1;
  Gemma4Config c = testing::ParseConfigOk(j);  // attention_k_eq_v absent: ignored
  EXPECT_EQ(c.layers[3].num_kv_heads, 2);
  EXPECT_FALSE(c.layers[3].k_eq_v);
  j["attention_k_eq_v"] = true;
  c = testing::ParseConfigOk(j);
  EXPECT_EQ(c.layers[3].num_kv_heads, 1);
  EXPECT_TRUE(c.layers[3].k_eq_v);
  EXPECT_EQ(c.layers[0].num_kv_heads, 2);
  EXPECT_FALSE(c.layers[0].k_eq_v);
}

TEST(ConfigAccepts, PerLayerConfigForms) {
  json j = Base();
  j.erase("global_head_dim");
  j["global_head_dim"] = 512;  // ignored once per_layer_config is present (HF)
  j["per_layer_config"] = {{"3", {{"head_dim", 64}, {"sliding_window", 8}}}, {"7", {{"head_dim", 64}}}};
  Gemma4Config a = testing::ParseConfigOk(j);  // sliding_window repeats the global value: fine
  EXPECT_EQ(a.layers[3].head_dim, 64);
  EXPECT_EQ(a.layers[7].head_dim, 64);
  json list = json::array();
  for (int l = 0; l < 8; ++l) list.push_back(l == 3 || l == 7 ? json{{"head_dim", 64}} : json{{"head_dim", 32}});
  j["per_layer_config"] = list;
  Gemma4Config b = testing::ParseConfigOk(j);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(b.layers[l].head_dim, a.layers[l].head_dim) << l;
}

TEST(ConfigAccepts, LegacyRopeFields) {
  json j = Base();
  j.erase("rope_parameters");
  j["rope_theta"] = 500000.0;
  j["rope_local_base_freq"] = 20000.0;
  Gemma4Config c = testing::ParseConfigOk(j);
  EXPECT_EQ(c.rope_sliding.type, RopeParams::Type::kDefault);
  EXPECT_DOUBLE_EQ(c.rope_sliding.theta, 20000.0);
  EXPECT_EQ(c.rope_full.type, RopeParams::Type::kProportional);
  EXPECT_DOUBLE_EQ(c.rope_full.theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope_full.partial_rotary_factor, 0.25);
  j["global_partial_rotary_factor"] = 0.5;
  EXPECT_DOUBLE_EQ(testing::ParseConfigOk(j).rope_full.partial_rotary_factor, 0.5);
  j["global_partial_rotary_factor"] = 2.0;
  Status s = ParseStatus(j.dump());
  EXPECT_NE(s.message().find("[config] global_partial_rotary_factor: must be in (0, 1]"), std::string::npos);
}

TEST(ConfigAccepts, RopeFactor) {
  json j = Base();
  j["rope_parameters"]["full_attention"]["factor"] = 8.0;
  EXPECT_DOUBLE_EQ(testing::ParseConfigOk(j).rope_full.factor, 8.0);
}

// ------------------------------------------------------------ quantization

TEST(ConfigQuantization, OverridesIncludingFalse) {
  json j = Base();
  j["quantization"] = {
      {"group_size", 64},
      {"bits", 4},
      {"language_model.model.layers.0.router.proj", {{"group_size", 64}, {"bits", 8}}},
      {"language_model.model.embed_tokens", false},
      {"language_model.model.layers.1.mlp.up_proj", {{"bits", 6}}},  // group inherited
      {"language_model.model.layers.2.mlp.up_proj", true},
      {"some_tool_metadata", "v1"},
  };
  Gemma4Config c = testing::ParseConfigOk(j);
  const QuantizationConfig& q = c.quantization;
  ASSERT_TRUE(q.present);
  EXPECT_EQ(q.defaults.mode, "affine");  // mode defaults to affine
  EXPECT_EQ(q.defaults.bits, 4);
  EXPECT_EQ(q.overrides.size(), 4u);
  const QuantSpec* off = q.Override("language_model.model.embed_tokens");
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(off->quantized);
  const QuantSpec* up = q.Override("language_model.model.layers.1.mlp.up_proj");
  ASSERT_NE(up, nullptr);
  EXPECT_TRUE(up->quantized);
  EXPECT_EQ(up->bits, 6);
  EXPECT_EQ(up->group_size, 64);
  const QuantSpec* same = q.Override("language_model.model.layers.2.mlp.up_proj");
  ASSERT_NE(same, nullptr);
  EXPECT_EQ(same->bits, 4);
  EXPECT_EQ(q.Override("some_tool_metadata"), nullptr);
}

TEST(ConfigQuantization, QuantizationConfigAloneIsRead) {
  json j = Base();
  j["quantization_config"] = {{"group_size", 32}, {"bits", 8}, {"mode", "affine"}};
  Gemma4Config c = testing::ParseConfigOk(j);
  ASSERT_TRUE(c.quantization.present);
  EXPECT_EQ(c.quantization.defaults.group_size, 32);
  EXPECT_EQ(c.quantization.defaults.bits, 8);
}

TEST(ConfigQuantization, InvalidBlocks) {
  struct Case {
    json block;
    StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"group_size", 64}, {"bits", 7}}, StatusCode::kInvalidArgument,
       "[config] quantization.bits: 7 is not supported (expected 2, 3, 4, 5, 6 or 8)"},
      {{{"group_size", 16}, {"bits", 4}}, StatusCode::kInvalidArgument,
       "[config] quantization.group_size: 16 is not supported (expected 32, 64 or 128)"},
      {{{"group_size", 32}, {"bits", 4}, {"mode", "mxfp4"}}, StatusCode::kUnsupported,
       "[config] quantization.mode: 'mxfp4' is not supported (only affine)"},
      {{{"group_size", 64}}, StatusCode::kInvalidArgument, "[config] quantization.bits: missing"},
      {{{"bits", 4}}, StatusCode::kInvalidArgument, "[config] quantization.group_size: missing"},
      {{{"group_size", 64}, {"bits", 4}, {"m.q_proj", {{"bits", 9}}}}, StatusCode::kInvalidArgument,
       "[config] quantization.m.q_proj.bits: 9 is not supported"},
      {{{"group_size", 64}, {"bits", 4}, {"m.q_proj", {{"mode", "nvfp4"}}}}, StatusCode::kUnsupported,
       "[config] quantization.m.q_proj.mode: 'nvfp4' is not supported"},
      {{{"group_size", 64}, {"bits", 4}, {"m.q_proj", {{"bits", "8"}}}}, StatusCode::kInvalidArgument,
       "[config] quantization.m.q_proj.bits: expected an integer, got string"},
      {json::array({1}), StatusCode::kInvalidArgument, "[config] quantization: expected an object, got array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    json j = Base();
    j["quantization"] = c.block;
    Status s = ParseStatus(j.dump());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), c.code);
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
  json j = Base();
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}};
  Status s = ParseStatus(j.dump());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("[config] quantization_config.quant_method: 'gptq' is not supported"), std::string::npos);
}

// ------------------------------------------------------- generation config

TEST(GenerationConfig, ParsesAllFields) {
  StatusOr<GenerationConfig> g = ParseGenerationConfig(
      R"({"eos_token_id": [1, 106, 50], "temperature": 1.0, "top_p": 0.95, "top_k": 64,
          "min_p": 0.05, "repetition_penalty": 1.1, "do_sample": true, "bos_token_id": 2})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->present);
  EXPECT_EQ(g->eos_token_ids, std::vector<int>({1, 106, 50}));
  EXPECT_EQ(g->temperature, 1.0);
  EXPECT_EQ(g->top_p, 0.95);
  EXPECT_EQ(g->top_k, 64);
  EXPECT_EQ(g->min_p, 0.05);
  EXPECT_EQ(g->repetition_penalty, 1.1);
  EXPECT_EQ(g->do_sample, true);
}

TEST(GenerationConfig, OptionalFieldsStayUnset) {
  StatusOr<GenerationConfig> g = ParseGenerationConfig(R"({"eos_token_id": 1, "top_p": null})");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->eos_token_ids, std::vector<int>({1}));
  EXPECT_FALSE(g->temperature.has_value());
  EXPECT_FALSE(g->top_p.has_value());
  EXPECT_FALSE(g->top_k.has_value());
  EXPECT_FALSE(g->do_sample.has_value());
}

TEST(GenerationConfig, InvalidValuesNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"temperature": -1})", "[generation_config] temperature: must not be negative, got -1"},
      {R"({"top_p": 1.5})", "[generation_config] top_p: must be in [0, 1], got 1.5"},
      {R"({"min_p": -0.1})", "[generation_config] min_p: must be in [0, 1]"},
      {R"({"top_k": -5})", "[generation_config] top_k: must not be negative, got -5"},
      {R"({"top_k": 1e20})", "[generation_config] top_k: 1e+20 is too large"},
      {R"({"repetition_penalty": 0})", "[generation_config] repetition_penalty: must be positive, got 0"},
      {R"({"eos_token_id": "x"})", "[generation_config] eos_token_id: expected an integer or a list"},
      {R"({"eos_token_id": [1, -2]})", "[generation_config] eos_token_id[1]: must not be negative"},
      {R"({"temperature": "hot"})", "[generation_config] temperature: expected a number, got string"},
      {R"({"do_sample": 1})", "[generation_config] do_sample: expected true or false"},
      {R"({"top_k": )", "[generation_config] not valid JSON: "},
      {R"("text")", "[generation_config] expected a JSON object at the top level, got string"},
  };
  for (const auto& [text, message] : cases) {
    StatusOr<GenerationConfig> g = ParseGenerationConfig(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(g.status().message().find(message), std::string::npos) << g.status().message();
  }
}

TEST(GenerationConfig, LoadFromDirectory) {
  const std::string dir = testing::MakeTempDir();
  StatusOr<GenerationConfig> absent = LoadGenerationConfig(dir);
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_FALSE(absent->present);
  EXPECT_TRUE(absent->eos_token_ids.empty());

  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": [1, 106], "top_k": 64})";
  StatusOr<GenerationConfig> g = LoadGenerationConfig(dir);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->present);
  EXPECT_EQ(g->eos_token_ids, std::vector<int>({1, 106}));
  EXPECT_EQ(g->top_k, 64);

  std::ofstream(dir + "/generation_config.json") << "{not json";
  StatusOr<GenerationConfig> bad = LoadGenerationConfig(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("[generation_config] " + dir + "/generation_config.json: not valid JSON", 0),
            0u)
      << bad.status().message();
}

}  // namespace
}  // namespace g4
