// g4 synth's generator: configs match the published geometry table, every
// tiny checkpoint loads and runs, output is a function of the seed, sizes
// follow from the formats, and g4 bench runs on the result.
#include "engine/synth_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io/config.h"
#include "model/gemma4_model.h"
#include "engine_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

constexpr int kVocab = 262144;

StatusOr<Gemma4Config> PresetConfig(const std::string& preset) {
  G4_ASSIGN_OR_RETURN(std::string text, SynthConfigJson(preset, "bf16"));
  return ParseGemma4Config(text);
}

std::vector<int> FullLayers(const Gemma4Config& c) {
  std::vector<int> out;
  for (int l = 0; l < c.num_hidden_layers; ++l)
    if (c.layers[l].type == AttentionType::kFull) out.push_back(l);
  return out;
}

std::vector<int> Every(int first, int step, int last) {
  std::vector<int> v;
  for (int i = first; i <= last; i += step) v.push_back(i);
  return v;
}

// Expected values are the released config.json values of each size and their
// KV-sharing maps (which layer reads which donor's K/V).
TEST(SynthConfigTest, E2bMatchesPublishedTable) {
  auto c = PresetConfig("e2b");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->vocab_size, kVocab);
  EXPECT_EQ(c->hidden_size, 1536);
  EXPECT_EQ(c->num_hidden_layers, 35);
  EXPECT_EQ(FullLayers(*c), Every(4, 5, 34));
  EXPECT_EQ(c->num_attention_heads, 8);
  EXPECT_EQ(c->hidden_size_per_layer_input, 256);
  EXPECT_EQ(c->vocab_size_per_layer_input, kVocab);
  EXPECT_EQ(c->num_kv_shared_layers, 20);
  EXPECT_EQ(c->sliding_window, 512);
  EXPECT_EQ(c->final_logit_softcapping, 30.0);
  EXPECT_EQ(c->layers[14].mlp_width, 6144);
  EXPECT_EQ(c->layers[15].mlp_width, 12288);
  EXPECT_EQ(c->layers[4].head_dim, 512);
  EXPECT_EQ(c->layers[4].num_kv_heads, 1);
  EXPECT_EQ(c->layers[0].head_dim, 256);
  EXPECT_TRUE(c->layers[15].kv_shared);
  EXPECT_FALSE(c->layers[14].kv_shared);
  EXPECT_EQ(c->layers[33].donor, 13);  // shared sliding
  EXPECT_EQ(c->layers[34].donor, 14);  // shared full
  EXPECT_EQ(c->rope_full.type, RopeParams::Type::kProportional);
  EXPECT_EQ(c->rope_full.theta, 1e6);
  EXPECT_EQ(c->rope_full.partial_rotary_factor, 0.25);
  EXPECT_EQ(c->rope_sliding.theta, 1e4);
  EXPECT_EQ(c->eos_token_ids.size(), 2u);
}

TEST(SynthConfigTest, E4bMatchesPublishedTable) {
  auto c = PresetConfig("e4b");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->hidden_size, 2560);
  EXPECT_EQ(c->num_hidden_layers, 42);
  EXPECT_EQ(FullLayers(*c), Every(5, 6, 41));
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->layers[5].num_kv_heads, 2);
  EXPECT_EQ(c->num_kv_shared_layers, 18);
  EXPECT_EQ(c->layers[24].mlp_width, 10240);
  EXPECT_EQ(c->layers[40].donor, 22);
  EXPECT_EQ(c->layers[41].donor, 23);
}

TEST(SynthConfigTest, MoeAnd31bAnd12bMatchPublishedTable) {
  auto moe = PresetConfig("26b-a4b");
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ(moe->hidden_size, 2816);
  EXPECT_EQ(moe->num_hidden_layers, 30);
  EXPECT_EQ(FullLayers(*moe), (std::vector<int>{5, 11, 17, 23, 29}));
  EXPECT_TRUE(moe->enable_moe_block);
  EXPECT_EQ(moe->num_experts, 128);
  EXPECT_EQ(moe->top_k_experts, 8);
  EXPECT_EQ(moe->moe_intermediate_size, 704);
  EXPECT_EQ(moe->intermediate_size, 2112);
  EXPECT_EQ(moe->layers[0].num_kv_heads, 8);
  EXPECT_EQ(moe->layers[5].num_kv_heads, 2);
  EXPECT_TRUE(moe->layers[5].k_eq_v);
  EXPECT_FALSE(moe->layers[4].k_eq_v);
  EXPECT_EQ(moe->sliding_window, 1024);
  EXPECT_FALSE(moe->has_ple());

  auto big = PresetConfig("31b");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->hidden_size, 5376);
  EXPECT_EQ(big->num_hidden_layers, 60);
  EXPECT_EQ(big->num_attention_heads, 32);
  EXPECT_EQ(big->layers[5].num_kv_heads, 4);
  EXPECT_EQ(big->layers[0].num_kv_heads, 16);
  EXPECT_EQ(big->intermediate_size, 21504);

  auto unified = PresetConfig("12b");
  ASSERT_TRUE(unified.ok()) << unified.status().ToString();
  EXPECT_EQ(unified->model_type, "gemma4_unified_text");
  EXPECT_EQ(unified->hidden_size, 3840);
  EXPECT_EQ(unified->num_hidden_layers, 48);
  EXPECT_EQ(unified->layers[47].num_kv_heads, 1);
  EXPECT_EQ(unified->layers[47].head_dim, 512);
  EXPECT_EQ(unified->intermediate_size, 15360);
}

TEST(SynthConfigTest, QuantizedConfigsCarryTheMlxBlock) {
  auto text = SynthConfigJson("26b-a4b", "q4");
  ASSERT_TRUE(text.ok());
  auto c = ParseGemma4Config(*text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->quantization.present);
  EXPECT_EQ(c->quantization.defaults.bits, 4);
  EXPECT_EQ(c->quantization.defaults.group_size, 64);
  const QuantSpec* router = c->quantization.Override("language_model.model.layers.7.router.proj");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->bits, 8);
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["quantization"], j["quantization_config"]);
}

TEST(SynthConfigTest, BadArgumentsAreErrors) {
  EXPECT_EQ(SynthConfigJson("gemma-9000", "q4").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SynthConfigJson("tiny", "q3").status().code(), StatusCode::kInvalidArgument);
  SynthOptions o;
  o.preset = "tiny";
  o.out_dir = testing::MakeTempDir();
  o.tokenizer_path = o.out_dir + "/no-such-tokenizer.json";
  EXPECT_EQ(SynthesizeCheckpoint(o).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(o.out_dir);
}

// The tiny checkpoints are a few hundred MB each, so they are written once.
class SynthTinyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { root_ = new std::string(testing::MakeTempDir()); }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(*root_, ec);
    delete root_;
    root_ = nullptr;
    made_.clear();
  }

  // Writes (once) preset/quant/seed and returns its directory, or "" after
  // recording a failure.
  static std::string Make(const std::string& preset, const std::string& quant, uint64_t seed = 0) {
    const std::string name = preset + "-" + quant + "-" + std::to_string(seed);
    auto it = made_.find(name);
    if (it != made_.end()) return it->second;
    SynthOptions o;
    o.preset = preset;
    o.quant = quant;
    o.seed = seed;
    o.out_dir = *root_ + "/" + name;
    o.tokenizer_path = testing::TestDataPath("tokenizer/tokenizer.json");
    StatusOr<SynthSummary> s = SynthesizeCheckpoint(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return "";
    EXPECT_GT(s->num_params, 0u);
    EXPECT_EQ(s->safetensors_bytes, std::filesystem::file_size(o.out_dir + "/model.safetensors"));
    made_[name] = o.out_dir;
    return o.out_dir;
  }

  static void LoadAndRun(const std::string& dir) {
    ASSERT_FALSE(dir.empty());
    auto backend = MakeCpuBackend();
    auto model = Gemma4Model::Load(dir, *backend);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const Gemma4Config& c = (*model)->config();
    EXPECT_EQ(c.vocab_size, kVocab);
    EXPECT_EQ((*model)->vocab_size(), kVocab);
    const std::vector<int32_t> ids = {2, 818, 5279, 3, 262143, 106};
    // The prompt in chunks of 4, then one decode step (greedy).
    auto solo = testing::RunSolo(**model, ids, 4, /*greedy=*/2);
    ASSERT_TRUE(solo.ok()) << solo.status().ToString();
    ASSERT_EQ(solo->logits.size(), (ids.size() + 1) * kVocab);
    const std::vector<float> logits(solo->logits.begin(), solo->logits.begin() + ids.size() * kVocab);
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      ASSERT_TRUE(std::isfinite(logits[i])) << "logit " << i << " of " << dir;
      ASSERT_LE(std::fabs(logits[i]), 30.0f);  // soft-capped
      sum += logits[i];
      sum_sq += double(logits[i]) * logits[i];
    }
    const double var = sum_sq / logits.size() - (sum / logits.size()) * (sum / logits.size());
    EXPECT_GT(var, 1e-6) << "logits are constant: weights did not reach the output";
    // The decode step from the cached state.
    for (size_t i = ids.size() * kVocab; i < solo->logits.size(); ++i) ASSERT_TRUE(std::isfinite(solo->logits[i]));
  }

  static std::string* root_;
  static std::map<std::string, std::string> made_;
};

std::string* SynthTinyTest::root_ = nullptr;
std::map<std::string, std::string> SynthTinyTest::made_;

TEST_F(SynthTinyTest, TinyGeometry) {
  const std::string dir = Make("tiny", "q4");
  auto c = LoadGemma4Config(dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->vocab_size, kVocab);
  EXPECT_EQ(c->hidden_size, 256);
  EXPECT_EQ(c->num_hidden_layers, 6);
  EXPECT_EQ(FullLayers(*c), (std::vector<int>{2, 5}));
  EXPECT_TRUE(c->has_ple());
  EXPECT_EQ(c->num_kv_shared_layers, 2);
  EXPECT_EQ(c->layers[4].donor, 3);
  EXPECT_EQ(c->layers[5].donor, 2);
  EXPECT_EQ(c->layers[0].head_dim, 64);
  EXPECT_EQ(c->layers[2].head_dim, 128);
  EXPECT_EQ(c->sliding_window, 64);
  EXPECT_EQ(c->layers[5].mlp_width, 2 * c->layers[0].mlp_width);
}

TEST_F(SynthTinyTest, F32LoadsAndRuns) { LoadAndRun(Make("tiny", "f32")); }
TEST_F(SynthTinyTest, Bf16LoadsAndRuns) { LoadAndRun(Make("tiny", "bf16")); }
TEST_F(SynthTinyTest, Q4LoadsAndRuns) { LoadAndRun(Make("tiny", "q4")); }
TEST_F(SynthTinyTest, Q8LoadsAndRuns) { LoadAndRun(Make("tiny", "q8")); }
TEST_F(SynthTinyTest, MoeBf16LoadsAndRuns) { LoadAndRun(Make("tiny-moe", "bf16")); }
TEST_F(SynthTinyTest, MoeQ4LoadsAndRuns) { LoadAndRun(Make("tiny-moe", "q4")); }

TEST_F(SynthTinyTest, LayoutsAreHuggingFaceAndMlx) {
  auto backend = MakeCpuBackend();
  auto hf = Gemma4Model::Load(Make("tiny", "bf16"), *backend);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ((*hf)->weights().prefix(), "model.language_model.");
  EXPECT_FALSE((*hf)->weights().embed_tokens.is_affine());
  EXPECT_EQ((*hf)->weights().embed_tokens.dtype, DType::kBF16);
  // KV-shared layers store no k/v.
  EXPECT_EQ((*hf)->weights().checkpoint().Find("model.language_model.layers.4.self_attn.k_proj.weight"), nullptr);
  EXPECT_NE((*hf)->weights().checkpoint().Find("model.language_model.layers.3.self_attn.k_proj.weight"), nullptr);

  auto mlx = Gemma4Model::Load(Make("tiny", "q4"), *backend);
  ASSERT_TRUE(mlx.ok()) << mlx.status().ToString();
  const Gemma4Weights& w = (*mlx)->weights();
  EXPECT_EQ(w.prefix(), "language_model.model.");
  EXPECT_TRUE(w.embed_tokens.is_affine());
  EXPECT_EQ(w.embed_tokens.bits, 4);
  EXPECT_TRUE(w.embed_tokens_per_layer.is_affine());  // N*P = 192 divides 64
  EXPECT_FALSE(w.layers[0].per_layer_projection.is_affine());  // input P = 32 does not
  EXPECT_TRUE(w.layers[0].q_proj.is_affine());

  auto f32 = Gemma4Model::Load(Make("tiny", "f32"), *backend);
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  EXPECT_EQ((*f32)->weights().embed_tokens.dtype, DType::kF32);

  auto moe = Gemma4Model::Load(Make("tiny-moe", "q4"), *backend);
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ((*moe)->weights().layers[0].router_proj.bits, 8);  // mlx-lm's router override
  EXPECT_EQ((*moe)->weights().layers[0].expert_gate[0].bits, 4);
}

TEST_F(SynthTinyTest, AffineValuesHaveTheIntendedSpread) {
  auto backend = MakeCpuBackend();
  auto m = Gemma4Model::Load(Make("tiny", "q4"), *backend);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const WeightMatrix& q = (*m)->weights().layers[1].q_proj;
  std::vector<float> row(q.cols);
  double sum = 0, sum_sq = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < q.rows; ++r) {
    DequantizeRow(q, r, row.data());
    for (float v : row) sum += v, sum_sq += double(v) * v, ++n;
  }
  const double mean = sum / n, sd = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(sd, 0.02, 0.004);
  EXPECT_LT(std::fabs(mean), 0.003);
}

bool SameBytes(const std::string& a, const std::string& b) {
  auto fa = MappedFile::Open(a);
  auto fb = MappedFile::Open(b);
  if (!fa.ok() || !fb.ok()) return false;
  return (*fa)->size() == (*fb)->size() && std::memcmp((*fa)->data(), (*fb)->data(), (*fa)->size()) == 0;
}

TEST_F(SynthTinyTest, ValuesAreAFunctionOfTheSeed) {
  const std::string a = Make("tiny", "q4", 0);
  const std::string b = Make("tiny", "q4", 7);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  // Rewrite seed 0 into a fresh folder.
  SynthOptions o;
  o.preset = "tiny";
  o.quant = "q4";
  o.out_dir = a + "-again";
  ASSERT_TRUE(SynthesizeCheckpoint(o).ok());
  EXPECT_TRUE(SameBytes(a + "/model.safetensors", o.out_dir + "/model.safetensors"));
  EXPECT_TRUE(SameBytes(a + "/config.json", o.out_dir + "/config.json"));
  EXPECT_FALSE(SameBytes(a + "/model.safetensors", b + "/model.safetensors"));
  EXPECT_EQ(std::filesystem::file_size(a + "/model.safetensors"),
            std::filesystem::file_size(b + "/model.safetensors"));
  EXPECT_TRUE(SameBytes(a + "/tokenizer.json", testing::TestDataPath("tokenizer/tokenizer.json")));
  std::filesystem::remove_all(o.out_dir);
}

TEST_F(SynthTinyTest, SizesFollowFromTheFormats) {
  auto size = [](const std::string& dir) {
    return static_cast<double>(std::filesystem::file_size(dir + "/model.safetensors"));
  };
  const double f32 = size(Make("tiny", "f32")), bf16 = size(Make("tiny", "bf16"));
  const double q4 = size(Make("tiny", "q4")), q8 = size(Make("tiny", "q8"));
  EXPECT_NEAR(f32 / bf16, 2.0, 0.01);
  // Affine group 64 stores b bits per weight plus bf16 scale and bias per 64
  // weights: 4.5 / 16 and 8.5 / 16 of bf16 (a few small bf16 tensors aside).
  EXPECT_NEAR(q4 / bf16, 4.5 / 16, 0.01);
  EXPECT_NEAR(q8 / bf16, 8.5 / 16, 0.01);
  EXPECT_GT(q4 / bf16, 1.0 / 8);
  EXPECT_LT(q4 / bf16, 1.0 / 3);
}

TEST_F(SynthTinyTest, GenerationConfigIsWritten) {
  auto g = LoadGenerationConfig(Make("tiny", "q4"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->present);
  EXPECT_EQ(g->eos_token_ids, (std::vector<int>{1, 106, 50}));
  EXPECT_EQ(g->top_k, 64);
  EXPECT_DOUBLE_EQ(g->top_p.value_or(0), 0.95);
  EXPECT_DOUBLE_EQ(g->temperature.value_or(0), 1.0);
}

TEST_F(SynthTinyTest, BenchReportsEveryMetric) {
  const std::string dir = Make("tiny", "q4");
  ASSERT_FALSE(dir.empty());
  const std::string cmd = testing::BinaryDir() + "/g4 bench --model " + dir +
                          " --prompt 16 --gen 4 --json --memcpy-mib 64 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  ASSERT_EQ(rc, 0) << out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(out);
  } catch (const std::exception&) {
    FAIL() << "not JSON: " << out;
  }
  for (const char* key : {"prompt_tokens", "gen_tokens", "load_s", "prefill_tok_s", "decode_tok_s", "ttft_ms",
                          "weight_bytes_per_token", "kv_bytes_per_token", "peak_rss_bytes", "checkpoint_bytes",
                          "decode_gb_s", "copy_gb_s", "decode_efficiency"}) {
    ASSERT_TRUE(j.contains(key)) << key << " missing in " << out;
    ASSERT_TRUE(j[key].is_number()) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_EQ(j["prompt_tokens"], 16);
  EXPECT_EQ(j["gen_tokens"], 4);
  EXPECT_EQ(j["checkpoint_bytes"].get<double>(), std::filesystem::file_size(dir + "/model.safetensors"));
  // Tiny at context 20 (16 prompt + 2 warm-up + 4 / 2 timed steps; < window
  // 64): sliding layers 0, 1, 3 and shared 4 (reading donor 3) read 2 heads
  // x 64; full layer 2 and shared 5 (reading donor 2) read 2 heads x 128. K
  // and V, bf16 (bench's default KV).
  EXPECT_EQ(j["kv"], "plain:bf16");
  EXPECT_EQ(j["warmup_steps"], 2);
  const double sliding = 20.0 * 2 * 2 * 64 * 2, full = 20.0 * 2 * 2 * 128 * 2;
  EXPECT_EQ(j["kv_bytes_per_token"].get<double>(), 4 * sliding + 2 * full);
  // A decode step reads at least the tied head (the whole quantized embedding).
  EXPECT_GT(j["weight_bytes_per_token"].get<double>(), kVocab * 256 * 0.5);
}

}  // namespace
}  // namespace g4
