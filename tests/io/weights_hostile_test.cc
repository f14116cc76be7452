// Weight loading against hostile or unusual checkpoints (issue 11): NaN/Inf
// weights (the numerics guard), a missing .scales tensor, and an untied LM
// head. Each test copies a testdata model, edits one tensor or the config,
// and loads it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "io/config.h"
#include "io/gemma4_weights.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;

// Edits one tensor's bytes in place; returning false drops the tensor.
using TensorEdit = std::function<bool(const TensorInfo&, std::string* bytes)>;

struct ExtraTensor {
  std::string name;
  std::string copy_of;  // bytes, dtype and shape of this tensor of the source
};

// Copies testdata model `name` into a fresh directory through `edit`, adding
// `extra` tensors and mutating config.json with `config_edit`.
std::string CopyModel(const std::string& name, const TensorEdit& edit,
                      const std::function<void(json&)>& config_edit = nullptr,
                      const std::vector<ExtraTensor>& extra = {}) {
  const std::string src = testing::TestDataPath("models/" + name);
  const std::string dst = testing::MakeTempDir();
  auto file = SafetensorsFile::Open(src + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return dst;
  SafetensorsWriter w;
  for (const TensorInfo& t : (*file)->tensors()) {
    std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (edit && !edit(t, &bytes)) continue;
    w.Add(t.name, t.dtype, t.shape, bytes.data(), bytes.size());
  }
  for (const ExtraTensor& e : extra) {
    const TensorInfo* t = (*file)->Find(e.copy_of);
    EXPECT_NE(t, nullptr) << e.copy_of;
    if (t) w.Add(e.name, t->dtype, t->shape, t->data, t->nbytes);
  }
  EXPECT_TRUE(w.Write(dst + "/model.safetensors").ok());
  std::ifstream in(src + "/config.json");
  json config = json::parse(in);
  if (config_edit) config_edit(config);
  std::ofstream(dst + "/config.json") << config.dump(2);
  return dst;
}

StatusOr<std::unique_ptr<Gemma4Weights>> LoadWeights(const std::string& dir) {
  G4_ASSIGN_OR_RETURN(Gemma4Config config, LoadGemma4Config(dir));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::Open(dir));
  return Gemma4Weights::Load(config, std::move(ckpt));
}

using testing::ExpectError;

// Writes a non-finite value of the tensor's dtype at element `index`.
void Poison(const TensorInfo& t, std::string* bytes, int64_t index, bool inf = false) {
  if (t.dtype == DType::kF32) {
    const uint32_t v = inf ? 0x7f800000u : 0x7fc00000u;
    std::memcpy(bytes->data() + 4 * index, &v, 4);
  } else if (t.dtype == DType::kBF16) {
    const uint16_t v = inf ? 0x7f80 : 0x7fc0;
    std::memcpy(bytes->data() + 2 * index, &v, 2);
  } else if (t.dtype == DType::kF16) {
    const uint16_t v = inf ? 0x7c00 : 0x7e00;
    std::memcpy(bytes->data() + 2 * index, &v, 2);
  } else {
    ADD_FAILURE() << "cannot poison " << t.Describe();
  }
}

TensorEdit PoisonOne(const std::string& name, int64_t index, bool inf = false) {
  return [=](const TensorInfo& t, std::string* bytes) {
    if (t.name == name) Poison(t, bytes, index, inf);
    return true;
  };
}

TEST(WeightsHostile, RealCheckpointsPassTheGuard) {
  for (const std::string& model : testing::kFixtureModels) {
    auto w = LoadWeights(testing::TestDataPath(std::string("models/") + model));
    ASSERT_TRUE(w.ok()) << model << ": " << w.status().ToString();
    EXPECT_EQ((*w)->lm_head.rows, 0) << "tied models have no separate head";
  }
  // The bundled demo model (scripts/run.sh).
  // Like tests/engine/demo_model_test.cc: models/demo sits in the source tree.
  const std::string demo_dir = std::string(__FILE__).substr(0, std::string(__FILE__).rfind('/')) + "/../../models/demo";
  auto demo = LoadWeights(demo_dir);
  ASSERT_TRUE(demo.ok()) << demo.status().ToString();
}

TEST(WeightsHostile, CleanCopiesLoad) {
  for (const char* model : {"tiny-e", "tiny-e-q4"}) {
    auto w = LoadWeights(CopyModel(model, nullptr));
    ASSERT_TRUE(w.ok()) << model << ": " << w.status().ToString();
  }
}

TEST(WeightsHostile, NanNormIsNamed) {
  ExpectError(LoadWeights(CopyModel("tiny-e", PoisonOne("model.norm.weight", 5))).status(), StatusCode::kCorrupt,
              {"[weights] model.norm.weight: element 5 is nan"});
  ExpectError(LoadWeights(CopyModel("tiny-e", PoisonOne("model.layers.2.layer_scalar", 0, true))).status(),
              StatusCode::kCorrupt, {"model.layers.2.layer_scalar: element 0 is inf"});
}

TEST(WeightsHostile, NanInSampledMatrixRowIsNamed) {
  // Row 0 and the last row are always sampled.
  ExpectError(LoadWeights(CopyModel("tiny-e", PoisonOne("model.layers.1.mlp.down_proj.weight", 7))).status(),
              StatusCode::kCorrupt, {"model.layers.1.mlp.down_proj.weight: row 0, column 7 is nan"});
  const int64_t last_row = 511 * 128;  // embed_tokens is [512, 128]
  ExpectError(LoadWeights(CopyModel("tiny-e", PoisonOne("model.embed_tokens.weight", last_row + 3, true))).status(),
              StatusCode::kCorrupt, {"model.embed_tokens.weight: row 511, column 3 is inf"});
}

TEST(WeightsHostile, NanAffineScaleOrBiasIsNamed) {
  const std::string module = "language_model.model.layers.0.mlp.gate_proj";
  ExpectError(LoadWeights(CopyModel("tiny-e-q4", PoisonOne(module + ".scales", 1))).status(), StatusCode::kCorrupt,
              {module + ".weight: row 0", "is nan after dequantization", ".scales and .biases"});
  ExpectError(LoadWeights(CopyModel("tiny-e-q4", PoisonOne(module + ".biases", 0, true))).status(),
              StatusCode::kCorrupt, {module + ".weight: row 0, column 0 is inf"});
}

TEST(WeightsHostile, MissingScalesIsReportedAsMissing) {
  const std::string module = "language_model.model.layers.0.mlp.gate_proj";
  auto drop = [&](const TensorInfo& t, std::string*) { return t.name != module + ".scales"; };
  ExpectError(LoadWeights(CopyModel("tiny-e-q4", drop)).status(), StatusCode::kNotFound,
              {"[weights] missing tensor " + module + ".scales", "U32 packed codes"});
}

TEST(WeightsHostile, UntiedHeadIsUsedWhenPresent) {
  // HF naming: lm_head.weight outside the model prefix.
  auto untie = [](json& c) { c["tie_word_embeddings"] = false; };
  const std::string dir =
      CopyModel("tiny-e", nullptr, untie, {{"lm_head.weight", "model.per_layer_model_projection.weight"}});
  // per_layer_model_projection is [128, 128], not [V=512, H=128]: the shape is checked.
  ExpectError(LoadWeights(dir).status(), StatusCode::kCorrupt, {"lm_head.weight", "config implies [512, 128]"});

  const std::string ok_dir =
      CopyModel("tiny-e", nullptr, untie, {{"lm_head.weight", "model.embed_tokens_per_layer.weight"}});
  auto w = LoadWeights(ok_dir);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const TensorInfo* head = (*w)->checkpoint().Find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ((*w)->lm_head.rows, 512);
  EXPECT_EQ((*w)->lm_head.cols, 128);
  EXPECT_EQ((*w)->lm_head.data, head->data);
  EXPECT_NE((*w)->lm_head.data, (*w)->embed_tokens.data);

  // Whole-model passes (Backend::PlaceWeights) see the head.
  int heads = 0;
  (*w)->ForEachTensor([&](const std::string& name, WeightMatrix& m) { heads += name == "lm_head" && m.rows == 512; },
                      [](const std::string&, const float*&, int64_t) {});
  EXPECT_EQ(heads, 1);

  // Tied: a stray lm_head.weight is ignored, as HF does.
  auto tied = LoadWeights(
      CopyModel("tiny-e", nullptr, nullptr, {{"lm_head.weight", "model.embed_tokens_per_layer.weight"}}));
  ASSERT_TRUE(tied.ok()) << tied.status().ToString();
  EXPECT_EQ((*tied)->lm_head.rows, 0);
  (*tied)->ForEachTensor([](const std::string& name, WeightMatrix&) { EXPECT_NE(name, "lm_head"); },
                         [](const std::string&, const float*&, int64_t) {});
}

TEST(WeightsHostile, UntiedQuantizedHeadInMlxNaming) {
  auto untie = [](json& c) { c["text_config"]["tie_word_embeddings"] = false; };
  const std::string p = "language_model.model.embed_tokens";
  const std::string dir = CopyModel("tiny-e-q4", nullptr, untie,
                                    {{"language_model.lm_head.weight", p + ".weight"},
                                     {"language_model.lm_head.scales", p + ".scales"},
                                     {"language_model.lm_head.biases", p + ".biases"}});
  auto w = LoadWeights(dir);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE((*w)->lm_head.is_affine());
  EXPECT_EQ((*w)->lm_head.rows, 512);
  EXPECT_EQ((*w)->lm_head.codes,
            reinterpret_cast<const uint32_t*>((*w)->checkpoint().Find("language_model.lm_head.weight")->data));
}

TEST(WeightsHostile, UntiedWithoutHeadIsAnError) {
  const std::string dir = CopyModel("tiny-e", nullptr, [](json& c) { c["tie_word_embeddings"] = false; });
  ExpectError(LoadWeights(dir).status(), StatusCode::kNotFound,
              {"[weights] ", "tie_word_embeddings: false", "no lm_head.weight"});
}

}  // namespace
}  // namespace g4
