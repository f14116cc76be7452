// The shipped demo model (models/demo, 4-bit, made by g4 quantize from the
// trained bf16 checkpoint) against transformers' float32 run of that bf16
// checkpoint (testdata/demo/golden.safetensors, written by training/train.py
// on the GPU with TF32 matmuls: good to about 1e-2 in the logits, far below
// what 4-bit weights move), and its tokenizer against the Rust tokenizers
// library's ids (testdata/demo/tokenizer_golden.json).
#include <gtest/gtest.h>

#include <cstdlib>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/ops.h"
#include "io/safetensors.h"
#include "model/gemma4_model.h"
#include "tokenizer/tokenizer.h"
#include "engine_test_util.h"
#include "test_backend.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;

// models/demo sits in the source tree (it is what `g4` runs by default), not
// in testdata; find it from this file's path.
template <typename T>
std::vector<T> Read(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* t = f.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<T> v(t->numel());
  std::memcpy(v.data(), t->data, t->nbytes);
  return v;
}

TEST(DemoModel, FourBitLogitsFollowTheTrainedModel) {
  auto backend = testing::MakeTestBackend();
  auto model = Gemma4Model::Load(DemoModelDir(), *backend);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Gemma4Config& c = (*model)->config();
  // The architecture the demo exists to exercise: PLE, KV sharing, both layer types.
  EXPECT_TRUE(c.has_ple());
  EXPECT_GT(c.num_kv_shared_layers, 0);
  EXPECT_TRUE(c.quantization.present);
  EXPECT_EQ(c.quantization.defaults.bits, 4);

  auto golden = SafetensorsFile::Open(testing::TestDataPath("demo/golden.safetensors"));
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const int64_t V = (*model)->vocab_size();
  int agree = 0, rows = 0;
  for (const std::string name : {"prose", "chat", "long"}) {
    const auto ids = Read<int32_t>(**golden, name + ".ids");
    const auto pos = Read<int32_t>(**golden, name + ".positions");
    const auto ref = Read<float>(**golden, name + ".logits");
    ASSERT_EQ(ref.size(), pos.size() * V);
    auto solo = testing::RunSolo(**model, ids, 128);
    ASSERT_TRUE(solo.ok()) << solo.status().ToString();
    const std::vector<float>& logits = solo->logits;
    double kl = 0;
    for (size_t i = 0; i < pos.size(); ++i) {
      const float* p = &ref[i * V];
      const float* q = &logits[pos[i] * V];
      double pm = p[0], qm = q[0];
      for (int64_t j = 0; j < V; ++j) pm = std::max(pm, double(p[j])), qm = std::max(qm, double(q[j]));
      double ps = 0, qs = 0;
      for (int64_t j = 0; j < V; ++j) ps += std::exp(p[j] - pm), qs += std::exp(q[j] - qm);
      for (int64_t j = 0; j < V; ++j) {
        const double lp = p[j] - pm - std::log(ps), lq = q[j] - qm - std::log(qs);
        kl += std::exp(lp) * (lp - lq);
      }
      agree += (std::max_element(p, p + V) - p) == (std::max_element(q, q + V) - q);
      ++rows;
    }
    // 4-bit weights cost this model about 0.02-0.06 nats per token.
    EXPECT_LT(kl / pos.size(), 0.15) << name;
  }
  EXPECT_GE(agree, rows * 3 / 4) << agree << " of " << rows;
}

TEST(DemoModel, TokenizerMatchesTheRustLibrary) {
  auto tok = Tokenizer::Load(DemoModelDir());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->vocab_size(), 4096);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_TRUE(tok->add_bos_token());
  EXPECT_TRUE(tok->AddedTokenId("<|turn>").has_value());
  EXPECT_TRUE(tok->AddedTokenId("<turn|>").has_value());
  std::ifstream in(testing::TestDataPath("demo/tokenizer_golden.json"));
  const auto golden = nlohmann::json::parse(in);
  ASSERT_GE(golden["cases"].size(), 5u);
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"];
    auto ids = tok->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tok->Decode(*ids), c["decoded"].get<std::string>()) << text;
  }
}

}  // namespace
}  // namespace g4
