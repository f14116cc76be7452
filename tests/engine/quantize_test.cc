// g4 quantize: the per-row quantizer against the loader's own dequantization
// (io/weight_matrix.h), and whole checkpoints: tiny fixtures quantized, loaded
// back and run against transformers' float32 goldens of the originals.
#include "engine/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/float16.h"
#include "io/safetensors.h"
#include "io/weight_matrix.h"
#include "model/gemma4_model.h"
#include "engine_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

// Checkpoint options without a progress callback (a braced {bits, group}
// leaves that member out, which -Wextra flags at every call).
QuantizeOptions Opts(int bits, int group_size) {
  QuantizeOptions o;
  o.bits = bits;
  o.group_size = group_size;
  return o;
}

// Quantizes `w` (rows x cols) and returns it as a WeightMatrix over the
// returned buffers, so DequantizeRow (the loader's reference) decodes it.
struct Quantized {
  std::vector<uint32_t> codes;
  std::vector<uint16_t> scales, biases;
  WeightMatrix m;
};

Quantized QuantizeMatrix(const std::vector<float>& w, int64_t rows, int64_t cols, int bits, int gs) {
  Quantized q;
  const int64_t words = cols * bits / 32, groups = cols / gs;
  q.codes.resize(rows * words);
  q.scales.resize(rows * groups);
  q.biases.resize(rows * groups);
  for (int64_t r = 0; r < rows; ++r)
    AffineQuantizeRow(&w[r * cols], cols, bits, gs, &q.codes[r * words], &q.scales[r * groups], &q.biases[r * groups]);
  q.m.format = WeightMatrix::Format::kAffine;
  q.m.rows = rows;
  q.m.cols = cols;
  q.m.bits = bits;
  q.m.group_size = gs;
  q.m.codes = q.codes.data();
  q.m.scales = q.scales.data();
  q.m.biases = q.biases.data();
  q.m.scale_dtype = DType::kBF16;
  return q;
}

// Rows with different shapes of distribution, including degenerate ones.
std::vector<float> TestRows(int64_t cols, int rows) {
  std::vector<float> w;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> uni(-3.0f, 1.0f);
  for (int r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float v = 0;
      switch (r % 6) {
        case 0: v = normal(rng); break;                       // typical trained weights
        case 1: v = uni(rng); break;                          // skewed negative
        case 2: v = -uni(rng); break;                         // skewed positive
        case 3: v = 0.0f; break;                              // all zero
        case 4: v = 0.75f; break;                             // constant
        case 5: v = (c % 7 == 0) ? 5.0f : normal(rng); break;  // outliers
      }
      w.push_back(v);
    }
  }
  return w;
}

class RowQuantizeTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RowQuantizeTest, HalfAStepInsideTheGridAndClippedCodesAtItsEnds) {
  const auto [bits, gs] = GetParam();
  const int64_t cols = 256, rows = 24;
  const std::vector<float> w = TestRows(cols, rows);
  Quantized q = QuantizeMatrix(w, rows, cols, bits, gs);
  const float n_bins = static_cast<float>((1 << bits) - 1);
  std::vector<float> deq(cols);
  int64_t inside = 0, clipped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(q.m, r, deq.data());
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t g = r * (cols / gs) + c / gs;
      const float s = Bf16ToF32(q.scales[g]), b = Bf16ToF32(q.biases[g]);
      const float x = w[r * cols + c];
      // Codes are chosen against the stored bf16 scale and bias, so only
      // float rounding in s * q + b separates the bounds from exact.
      const float slack = 1e-6f + 1e-5f * (std::fabs(b) + std::fabs(s) * n_bins);
      const float ideal = (x - b) / s;  // the unclipped code
      if (ideal >= -0.5f && ideal <= n_bins + 0.5f) {
        ASSERT_LE(std::fabs(deq[c] - x), 0.5f * std::fabs(s) + slack) << "row " << r << " col " << c;
        ++inside;
      } else {
        // Past the grid's far end: the bf16 scale (up to n * 2^-9 steps
        // short) and the nudge to edge / round(edge / s) (under a step)
        // shorten the grid, and the code clips to the last level.
        const float end = ideal < 0 ? b : b + n_bins * s;
        ASSERT_NEAR(deq[c], end, slack) << "row " << r << " col " << c;
        ASSERT_LE(std::fabs(deq[c] - x), 1.55f * std::fabs(s) + slack) << "row " << r << " col " << c;
        ++clipped;
      }
    }
  }
  EXPECT_GT(inside, 50 * clipped);  // clipping is the rare far-end case
}

TEST_P(RowQuantizeTest, EdgeOfLargerMagnitudeIsTheBiasAndZeroStaysNearZero) {
  const auto [bits, gs] = GetParam();
  const int64_t cols = 256, rows = 24;
  const std::vector<float> w = TestRows(cols, rows);
  Quantized q = QuantizeMatrix(w, rows, cols, bits, gs);
  std::vector<float> deq(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(q.m, r, deq.data());
    for (int64_t g0 = 0; g0 < cols; g0 += gs) {
      const float* x = &w[r * cols + g0];
      const float lo = *std::min_element(x, x + gs), hi = *std::max_element(x, x + gs);
      const float edge = std::fabs(lo) > std::fabs(hi) ? lo : hi;
      const float b = Bf16ToF32(q.biases[r * (cols / gs) + g0 / gs]);
      if (edge != 0.0f) {
        EXPECT_EQ(b, RoundBf16(edge)) << "row " << r << " group " << g0 / gs;
      }
      for (int i = 0; i < gs; ++i) {
        if (x[i] == edge) {
          EXPECT_NEAR(deq[g0 + i], edge, 1e-2f * std::fabs(edge));
        }
        if (x[i] == 0.0f) {
          EXPECT_NEAR(deq[g0 + i], 0.0f, 0.02f * std::fabs(edge) + 1e-6f);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BitsAndGroups, RowQuantizeTest,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 6, 8), ::testing::Values(32, 64, 128)));

// ------------------------------------------------------------ checkpoints
std::vector<float> Floats(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* t = f.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<float> v(t->numel());
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

std::vector<int32_t> Ints(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* t = f.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<int32_t> v(t->numel());
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

struct LogitStats {
  double max_abs = 0;
  int top1_agree = 0;
  int rows = 0;
};

LogitStats CompareLogits(const std::vector<float>& ref, const std::vector<float>& got, int64_t V) {
  LogitStats s;
  s.rows = static_cast<int>(ref.size() / V);
  for (int r = 0; r < s.rows; ++r) {
    const float* a = &ref[r * V];
    const float* b = &got[r * V];
    for (int64_t j = 0; j < V; ++j) s.max_abs = std::max(s.max_abs, static_cast<double>(std::fabs(a[j] - b[j])));
    s.top1_agree += (std::max_element(a, a + V) - a) == (std::max_element(b, b + V) - b);
  }
  return s;
}

struct GoldenRun {
  LogitStats stats;
  double mean_abs = 0;
  double bf16_max_abs = -1;  // the golden's own bf16-vs-f32 spread, when it has one
};

// Quantizes testdata/models/NAME into OUT and runs the golden "long" prompt.
GoldenRun RunGolden(const std::string& name, const std::string& out, int bits, std::unique_ptr<Gemma4Model>* keep,
                    std::unique_ptr<Backend>* backend) {
  GoldenRun run;
  const std::string src = testing::TestDataPath("models/" + name);
  auto r = QuantizeCheckpoint(src, out, Opts(bits, 64));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return run;
  *backend = MakeCpuBackend();
  auto m = Gemma4Model::Load(out, **backend);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return run;
  *keep = std::move(m).value();
  Gemma4Model& model = **keep;
  auto g = SafetensorsFile::Open(src + "/golden.safetensors");
  EXPECT_TRUE(g.ok());
  if (!g.ok()) return run;
  const std::vector<int32_t> ids = Ints(**g, "long.ids");
  const std::vector<float> ref = Floats(**g, "long.logits");
  auto solo = testing::RunSolo(model, ids, 16);
  EXPECT_TRUE(solo.ok()) << solo.status().ToString();
  if (!solo.ok()) return run;
  const std::vector<float>& got = solo->logits;
  run.stats = CompareLogits(ref, got, model.vocab_size());
  for (size_t i = 0; i < ref.size(); ++i) run.mean_abs += std::fabs(ref[i] - got[i]);
  run.mean_abs /= std::max<size_t>(1, ref.size());
  if ((*g)->Find("long.logits_bf16")) {
    const std::vector<float> bf = Floats(**g, "long.logits_bf16");
    run.bf16_max_abs = CompareLogits(ref, bf, model.vocab_size()).max_abs;
  }
  return run;
}

// The tiny fixtures have random weights scaled to make every layer matter,
// so small weight errors grow through the network: merely running them in
// bf16 moves logits by up to 0.6-1.2. The bounds are set against that.
class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, EightBitIsCloseAndFourBitIsBoundedAgainstTheOriginalsGolden) {
  const std::string tmp = testing::MakeTempDir();
  std::unique_ptr<Backend> ops8, ops4;
  std::unique_ptr<Gemma4Model> m8, m4;
  const GoldenRun q8 = RunGolden(GetParam(), tmp + "/q8", 8, &m8, &ops8);
  const GoldenRun q4 = RunGolden(GetParam(), tmp + "/q4", 4, &m4, &ops4);
  ASSERT_GT(q8.stats.rows, 0);
  ASSERT_GT(q4.stats.rows, 0);
  EXPECT_LT(q8.mean_abs, 0.5);
  if (q8.bf16_max_abs > 0) {
    EXPECT_LT(q8.stats.max_abs, 1.5 * q8.bf16_max_abs);
  }
  EXPECT_GE(q8.stats.top1_agree, q8.stats.rows - 2);
  EXPECT_LT(q4.mean_abs, 6.0);
  EXPECT_GT(q4.mean_abs, q8.mean_abs);  // fewer bits, more error
  EXPECT_GE(q4.stats.top1_agree, q4.stats.rows * 3 / 4) << q4.stats.top1_agree << " of " << q4.stats.rows;
  EXPECT_TRUE(m8->weights().layers[0].q_proj.is_affine());
  EXPECT_EQ(m8->weights().layers[0].q_proj.bits, 8);
  EXPECT_EQ(m4->weights().layers[0].q_proj.bits, 4);
}

INSTANTIATE_TEST_SUITE_P(HfFixtures, FixtureTest, ::testing::Values("tiny-e", "tiny-e2", "tiny-dense", "tiny-moe"));

TEST(QuantizeCheckpoint, MoeExpertsAreSplitAndTheRouterStaysAtEightBits) {
  const std::string out = testing::MakeTempDir() + "/moe";
  ASSERT_TRUE(QuantizeCheckpoint(testing::TestDataPath("models/tiny-moe"), out, Opts(4, 64)).ok());
  std::ifstream in(out + "/config.json");
  const auto cfg = nlohmann::json::parse(in);
  EXPECT_EQ(cfg["model_type"], "gemma4");
  EXPECT_EQ(cfg["text_config"]["num_experts"], 8);
  EXPECT_EQ(cfg["quantization"]["bits"], 4);
  EXPECT_EQ(cfg["quantization"]["language_model.model.layers.0.router.proj"]["bits"], 8);
  EXPECT_EQ(cfg["quantization_config"], cfg["quantization"]);
  auto ck = Checkpoint::Open(out);
  ASSERT_TRUE(ck.ok());
  const std::string l0 = "language_model.model.layers.0.";
  EXPECT_NE((*ck)->Find(l0 + "experts.switch_glu.gate_proj.scales"), nullptr);
  EXPECT_NE((*ck)->Find(l0 + "experts.switch_glu.up_proj.weight"), nullptr);
  EXPECT_NE((*ck)->Find(l0 + "router.scale"), nullptr);
  EXPECT_NE((*ck)->Find(l0 + "layer_scalar"), nullptr);
  EXPECT_EQ((*ck)->Find(l0 + "experts.gate_up_proj"), nullptr);
  const TensorInfo* router = (*ck)->Find(l0 + "router.proj.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->shape.back(), 128 * 8 / 32);  // hidden 128 at 8 bits
}

TEST(QuantizeCheckpoint, DequantizedWeightsStayNearTheOriginals) {
  const std::string out = testing::MakeTempDir() + "/q4";
  ASSERT_TRUE(QuantizeCheckpoint(testing::TestDataPath("models/tiny-e"), out, Opts(4, 64)).ok());
  auto backend = MakeCpuBackend();
  auto model = Gemma4Model::Load(out, *backend);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto orig = Checkpoint::Open(testing::TestDataPath("models/tiny-e"));
  ASSERT_TRUE(orig.ok());
  struct Probe { std::string name; const WeightMatrix* m; };
  const Gemma4Weights& w = (*model)->weights();
  const std::vector<Probe> probes = {{"model.layers.0.self_attn.q_proj.weight", &w.layers[0].q_proj},
                                     {"model.layers.3.mlp.down_proj.weight", &w.layers[3].down_proj},
                                     {"model.embed_tokens.weight", &w.embed_tokens},
                                     {"model.embed_tokens_per_layer.weight", &w.embed_tokens_per_layer}};
  for (const Probe& p : probes) {
    const TensorInfo* t = (*orig)->Find(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    ASSERT_TRUE(p.m->is_affine()) << p.name;
    ASSERT_EQ(p.m->bits, 4);
    std::vector<float> row(p.m->cols);
    const uint16_t* scales = static_cast<const uint16_t*>(p.m->scales);
    int64_t within_half = 0, total = 0;
    for (int64_t r = 0; r < p.m->rows; ++r) {
      DequantizeRow(*p.m, r, row.data());
      for (int64_t c = 0; c < p.m->cols; ++c) {
        float x;
        std::memcpy(&x, t->data + (r * p.m->cols + c) * 4, 4);
        const float s = std::fabs(Bf16ToF32(scales[r * p.m->groups_per_row() + c / p.m->group_size]));
        ASSERT_LE(std::fabs(row[c] - x), 1.55f * s) << p.name << " [" << r << ", " << c << "]";
        within_half += std::fabs(row[c] - x) <= 0.5f * s * 1.0001f;
        ++total;
      }
    }
    EXPECT_GE(within_half, total * 99 / 100) << p.name;
  }
  // per_layer_projection has 16 inputs, not a multiple of 64: kept as stored.
  auto q = Checkpoint::Open(out);
  ASSERT_TRUE(q.ok());
  const TensorInfo* plp = (*q)->Find("language_model.model.layers.0.per_layer_projection.weight");
  ASSERT_NE(plp, nullptr);
  EXPECT_EQ(plp->dtype, DType::kF32);
  EXPECT_EQ((*q)->Find("language_model.model.layers.0.per_layer_projection.scales"), nullptr);
}

// Released HF checkpoints still carry k/v/k_norm for KV-shared layers, a
// tied lm_head and the towers; none of them may reach the output.
TEST(QuantizeCheckpoint, DropsSharedKvTiedHeadAndTowers) {
  const std::string src = testing::TestDataPath("models/tiny-e");
  const std::string tmp = testing::MakeTempDir();
  const std::string extra = tmp + "/extra";
  fs::create_directories(extra);
  fs::copy_file(src + "/config.json", extra + "/config.json");
  auto st = SafetensorsFile::Open(src + "/model.safetensors");
  ASSERT_TRUE(st.ok());
  SafetensorsWriter writer;
  for (const TensorInfo& t : (*st)->tensors()) writer.Add(t.name, t.dtype, t.shape, t.data, t.nbytes);
  const TensorInfo* k0 = (*st)->Find("model.layers.0.self_attn.k_proj.weight");
  const TensorInfo* kn0 = (*st)->Find("model.layers.0.self_attn.k_norm.weight");
  const TensorInfo* emb = (*st)->Find("model.embed_tokens.weight");
  ASSERT_TRUE(k0 && kn0 && emb);
  writer.Add("model.layers.6.self_attn.k_proj.weight", k0->dtype, k0->shape, k0->data, k0->nbytes);
  writer.Add("model.layers.6.self_attn.v_proj.weight", k0->dtype, k0->shape, k0->data, k0->nbytes);
  writer.Add("model.layers.6.self_attn.k_norm.weight", kn0->dtype, kn0->shape, kn0->data, kn0->nbytes);
  writer.Add("lm_head.weight", emb->dtype, emb->shape, emb->data, emb->nbytes);
  writer.Add("model.vision_tower.patch.weight", k0->dtype, k0->shape, k0->data, k0->nbytes);
  ASSERT_TRUE(writer.Write(extra + "/model.safetensors").ok());

  auto plain = QuantizeCheckpoint(src, tmp + "/plain", Opts(4, 64));
  auto with_extra = QuantizeCheckpoint(extra, tmp + "/with-extra", Opts(4, 64));
  ASSERT_TRUE(plain.ok() && with_extra.ok());
  EXPECT_EQ(with_extra->dropped, plain->dropped + 5);
  EXPECT_EQ(with_extra->quantized, plain->quantized);
  // Same tensors in, same bytes out: the extras left no trace.
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(read(tmp + "/plain/model.safetensors"), read(tmp + "/with-extra/model.safetensors"));
}

// An untied head (tie_word_embeddings: false) is a weight of its own: the
// model uses it, and quantize keeps it (quantized) with the flag.
TEST(QuantizeCheckpoint, KeepsAnUntiedHeadAndTheModelUsesIt) {
  const std::string src = testing::TestDataPath("models/tiny-e");
  const std::string tmp = testing::MakeTempDir();
  const std::string untied = tmp + "/untied";
  fs::create_directories(untied);
  {
    std::ifstream in(src + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["tie_word_embeddings"] = false;
    std::ofstream(untied + "/config.json") << config.dump(2);
  }
  auto st = SafetensorsFile::Open(src + "/model.safetensors");
  ASSERT_TRUE(st.ok());
  SafetensorsWriter writer;
  for (const TensorInfo& t : (*st)->tensors()) writer.Add(t.name, t.dtype, t.shape, t.data, t.nbytes);
  const TensorInfo* emb = (*st)->Find("model.embed_tokens.weight");
  ASSERT_TRUE(emb && emb->dtype == DType::kF32);
  std::vector<float> head = testing::RandomFloats(emb->numel(), 5, -0.05f, 0.05f);
  writer.Add("lm_head.weight", DType::kF32, emb->shape, head.data(), head.size() * sizeof(float));
  ASSERT_TRUE(writer.Write(untied + "/model.safetensors").ok());

  const std::vector<int32_t> ids = {5, 17, 3, 200, 9};
  auto backend = MakeCpuBackend();
  auto tied_model = Gemma4Model::Load(src, *backend);
  auto untied_model = Gemma4Model::Load(untied, *backend);
  ASSERT_TRUE(tied_model.ok() && untied_model.ok()) << untied_model.status().ToString();
  EXPECT_EQ((*untied_model)->weights().lm_head.rows, emb->shape[0]);
  auto a = testing::RunSolo(**tied_model, ids, 8), b = testing::RunSolo(**untied_model, ids, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->logits, b->logits) << "the untied head was not used";

  auto q = QuantizeCheckpoint(untied, tmp + "/q4", Opts(4, 64));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto qc = Checkpoint::Open(tmp + "/q4");
  ASSERT_TRUE(qc.ok());
  EXPECT_NE((*qc)->Find("language_model.lm_head.weight"), nullptr);
  EXPECT_NE((*qc)->Find("language_model.lm_head.scales"), nullptr);
  auto q_model = Gemma4Model::Load(tmp + "/q4", *backend);
  ASSERT_TRUE(q_model.ok()) << q_model.status().ToString();
  EXPECT_FALSE((*q_model)->config().tie_word_embeddings);
  EXPECT_TRUE((*q_model)->weights().lm_head.is_affine());
}

TEST(QuantizeErrors, RejectsBadOptionsAndQuantizedInput) {
  const std::string tmp = testing::MakeTempDir();
  const std::string tiny = testing::TestDataPath("models/tiny-e");
  auto bits = QuantizeCheckpoint(tiny, tmp + "/a", Opts(7, 64));
  EXPECT_EQ(bits.status().code(), StatusCode::kInvalidArgument);
  auto group = QuantizeCheckpoint(tiny, tmp + "/b", Opts(4, 48));
  EXPECT_EQ(group.status().code(), StatusCode::kInvalidArgument);
  auto again = QuantizeCheckpoint(testing::TestDataPath("models/tiny-e-q4"), tmp + "/c", Opts(4, 64));
  EXPECT_EQ(again.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(again.status().message().find("[quantize]"), std::string::npos);
  auto missing = QuantizeCheckpoint(tmp + "/nope", tmp + "/d", Opts(4, 64));
  EXPECT_FALSE(missing.ok());
  auto same = QuantizeCheckpoint(tiny, tiny, Opts(4, 64));
  EXPECT_EQ(same.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp + "/a/model.safetensors"));
}

}  // namespace
}  // namespace g4
