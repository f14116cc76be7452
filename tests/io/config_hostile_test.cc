// Hostile config.json / generation_config.json inputs (issue 11): absurd
// values that pass a sign check, duplicate keys, contradicting quantization
// blocks, deep nesting, and paths that are not regular files.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/limits.h"
#include "io/config.h"
#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;

// A small valid flat config in the shape of testdata/models/tiny-e.
json HostileBase() {
  return {
      {"model_type", "gemma4_text"},
      {"vocab_size", 512},
      {"hidden_size", 128},
      {"intermediate_size", 256},
      {"num_hidden_layers", 4},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},
      {"head_dim", 32},
      {"global_head_dim", 64},
      {"sliding_window", 8},
      {"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}}},
      {"final_logit_softcapping", 30.0},
      {"rms_norm_eps", 1e-6},
      {"eos_token_id", 1},
  };
}

using testing::ExpectError;

Status ParseStatus(const json& j) { return ParseGemma4Config(j.dump()).status(); }

TEST(ConfigHostile, BaseIsValid) {
  ASSERT_TRUE(ParseStatus(HostileBase()).ok()) << ParseStatus(HostileBase()).ToString();
}

TEST(ConfigHostile, AbsurdFloatsNameFieldAndRange) {
  struct Case {
    std::function<void(json&)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["rope_parameters"]["sliding_attention"]["rope_theta"] = 1e-308; },
       "[config] rope_parameters.sliding_attention.rope_theta: 1e-308 is outside the accepted range [1, 1e+12]"},
      {[](json& j) { j["rope_parameters"]["full_attention"]["rope_theta"] = 1e300; },
       "rope_parameters.full_attention.rope_theta: 1e+300 is outside the accepted range"},
      {[](json& j) { j["rope_parameters"]["full_attention"]["factor"] = 1e-300; },
       "rope_parameters.full_attention.factor: 1e-300 is outside the accepted range [0.001, 1e+06]"},
      {[](json& j) { j["rms_norm_eps"] = 1e308; },
       "[config] rms_norm_eps: 1e+308 is outside the accepted range [1e-12, 0.1]"},
      {[](json& j) { j["rms_norm_eps"] = 1e-300; }, "[config] rms_norm_eps: 1e-300 is outside"},
      {[](json& j) { j["final_logit_softcapping"] = 1e-300; },
       "[config] final_logit_softcapping: 1e-300 is outside the accepted range [1, 1e+06] (or 0 for none)"},
      {[](json& j) {
         j.erase("rope_parameters");
         j["rope_theta"] = 1e-308;
       },
       "[config] rope_theta: 1e-308 is outside the accepted range"},
      {[](json& j) {
         j.erase("rope_parameters");
         j["rope_local_base_freq"] = 1e-308;
       },
       "[config] rope_local_base_freq: 1e-308 is outside the accepted range"},
  };
  for (const Case& c : cases) {
    json j = HostileBase();
    c.mutate(j);
    ExpectError(ParseStatus(j), StatusCode::kInvalidArgument, {c.message});
  }
  json none = HostileBase();
  none["final_logit_softcapping"] = 0;  // 0 still means "no soft-capping"
  EXPECT_TRUE(ParseStatus(none).ok());
}

TEST(ConfigHostile, AbsurdGenerationValues) {
  ExpectError(ParseGenerationConfig(R"({"temperature": 1e-300})").status(), StatusCode::kInvalidArgument,
              {"[generation_config] temperature: 1e-300 is outside the accepted range [0.001, 100] (or 0 for greedy)"});
  ExpectError(ParseGenerationConfig(R"({"repetition_penalty": 1e300})").status(), StatusCode::kInvalidArgument,
              {"repetition_penalty: 1e+300 is outside the accepted range"});
  auto greedy = ParseGenerationConfig(R"({"temperature": 0, "do_sample": false})");
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  EXPECT_EQ(greedy->do_sample, false);  // exposed for callers to apply
}

TEST(ConfigHostile, DuplicateKeysAreErrors) {
  std::string text = HostileBase().dump();
  text.insert(1, "\"hidden_size\": 64, ");
  ExpectError(ParseGemma4Config(text).status(), StatusCode::kInvalidArgument,
              {"[config] ", "key \"hidden_size\" appears twice"});
  std::string nested = HostileBase().dump();
  const std::string theta = "\"rope_theta\":10000.0";
  const size_t at = nested.find(theta);
  ASSERT_NE(at, std::string::npos);
  nested.insert(at, "\"rope_theta\":1.0,");
  ExpectError(ParseGemma4Config(nested).status(), StatusCode::kInvalidArgument,
              {"\"rope_theta\" appears twice in rope_parameters.sliding_attention"});
  ExpectError(ParseGenerationConfig(R"({"do_sample": true, "do_sample": false})").status(),
              StatusCode::kInvalidArgument, {"[generation_config] ", "\"do_sample\" appears twice"});
}

TEST(ConfigHostile, QuantizationBlocksMustAgree) {
  json j = HostileBase();
  j["quantization"] = {{"group_size", 64}, {"bits", 4}};
  j["quantization_config"] = {{"group_size", 64}, {"bits", 8}};
  ExpectError(ParseStatus(j), StatusCode::kInvalidArgument,
              {"[config] quantization_config: disagrees with quantization", "8-bit", "4-bit"});
  j["quantization_config"] = {{"group_size", 64}, {"bits", 4}, {"model.layers.0.mlp.up_proj", false}};
  ExpectError(ParseStatus(j), StatusCode::kInvalidArgument,
              {"disagrees with quantization", "'model.layers.0.mlp.up_proj'"});
  json nested = {{"model_type", "gemma4"}, {"text_config", HostileBase()}};
  nested["quantization"] = {{"group_size", 64}, {"bits", 4}};
  nested["text_config"]["quantization"] = {{"group_size", 32}, {"bits", 4}};
  ExpectError(ParseStatus(nested), StatusCode::kInvalidArgument,
              {"text_config.quantization: disagrees with quantization"});
  // Identical blocks (what MLX writes) are fine.
  j["quantization_config"] = j["quantization"];
  EXPECT_TRUE(ParseStatus(j).ok()) << ParseStatus(j).ToString();
}

TEST(ConfigHostile, ModuleOverrideMustBeAnOverride) {
  json j = HostileBase();
  j["quantization"] = {{"group_size", 64}, {"bits", 4}, {"model.layers.0.mlp.up_proj", "x"}};
  ExpectError(ParseStatus(j), StatusCode::kInvalidArgument,
              {"[config] quantization.model.layers.0.mlp.up_proj: expected false, true or {bits, group_size",
               "string"});
  j["quantization"] = {{"group_size", 64}, {"bits", 4}, {"model.layers.0.mlp.up_proj", 8}};
  ExpectError(ParseStatus(j), StatusCode::kInvalidArgument, {"got number"});
}

TEST(ConfigHostile, DeepNestingIsACleanError) {
  std::string text = "{\"text_config\": ";
  for (int i = 0; i < 100000; ++i) text += "{\"a\": ";
  ExpectError(ParseGemma4Config(text).status(), StatusCode::kInvalidArgument, {"[config] ", "kMaxJsonDepth"});
  ExpectError(ParseGenerationConfig(std::string(99'000, '[')).status(), StatusCode::kInvalidArgument,
              {"[generation_config] ", "kMaxJsonDepth"});
}

TEST(ConfigHostile, PathsThatAreNotFiles) {
  ::alarm(10);  // a FIFO that blocks open() would hang here
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(::mkdir((dir + "/config.json").c_str(), 0755), 0);
  ExpectError(LoadGemma4Config(dir).status(), StatusCode::kInvalidArgument,
              {"[config] " + dir + "/config.json is a directory, not a file"});
  ASSERT_EQ(::mkdir((dir + "/generation_config.json").c_str(), 0755), 0);
  ExpectError(LoadGenerationConfig(dir).status(), StatusCode::kInvalidArgument,
              {"[generation_config] " + dir + "/generation_config.json is a directory, not a file"});

  const std::string fifo_dir = testing::MakeTempDir();
  ASSERT_EQ(::mkfifo((fifo_dir + "/config.json").c_str(), 0644), 0);
  ExpectError(LoadGemma4Config(fifo_dir).status(), StatusCode::kInvalidArgument, {"named pipe (FIFO)"});

  const std::string dev_dir = testing::MakeTempDir();
  ASSERT_EQ(::symlink("/dev/zero", (dev_dir + "/config.json").c_str()), 0);
  ExpectError(LoadGemma4Config(dev_dir).status(), StatusCode::kInvalidArgument, {"character device"});

  const std::string big_dir = testing::MakeTempDir();
  testing::WriteFileBytes(big_dir + "/config.json", "{}");
  ASSERT_EQ(::truncate((big_dir + "/config.json").c_str(), static_cast<off_t>(kMaxConfigBytes + 1)), 0);
  ExpectError(LoadGemma4Config(big_dir).status(), StatusCode::kOutOfRange, {"kMaxConfigBytes"});

  const std::string loop_dir = testing::MakeTempDir();
  ASSERT_EQ(::symlink((loop_dir + "/m").c_str(), (loop_dir + "/m").c_str()), 0);
  ExpectError(LoadGemma4Config(loop_dir + "/m").status(), StatusCode::kInvalidArgument,
              {"[config] ", "symbolic links"});
  ExpectError(LoadGenerationConfig(loop_dir + "/m").status(), StatusCode::kInvalidArgument, {"symbolic links"});
  ::alarm(0);
}

}  // namespace
}  // namespace g4
