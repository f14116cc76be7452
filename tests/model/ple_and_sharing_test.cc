// Unit tests of two Gemma 4 specifics: the per-layer-input (PLE) block
// against a float64 reference computed straight from the weights, and the
// KV-sharing wiring (shared layers own no cache and never append).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/ops.h"
#include "model/gemma4_model.h"
#include "test_util.h"

namespace g4 {
namespace {

std::vector<double> Row(const WeightMatrix& w, int64_t r) {
  std::vector<float> f(w.cols);
  DequantizeRow(w, r, f.data());
  return std::vector<double>(f.begin(), f.end());
}

void ExpectPleMatchesReference(const std::string& name) {
  auto ops = MakeCpuOps();
  auto m = Gemma4Model::Load(testing::TestDataPath("models/" + name), ops.get());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Gemma4Model& model = **m;
  const Gemma4Config& c = model.config();
  const Gemma4Weights& w = model.weights();
  const std::vector<int32_t> ids = {3, 250, 17, 511, 0};
  std::vector<float> got;
  ASSERT_TRUE(model.PerLayerInputs(ids.data(), ids.size(), &got).ok());
  const int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input, N = c.num_hidden_layers;
  ASSERT_EQ(got.size(), ids.size() * N * P);
  double worst = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    // h0 = E[t] * sqrt(H) (float32 weights: the exact factor).
    std::vector<double> h = Row(w.embed_tokens, ids[t]);
    for (double& x : h) x *= std::sqrt(static_cast<double>(H));
    const std::vector<double> tok = Row(w.embed_tokens_per_layer, ids[t]);
    for (int64_t l = 0; l < N; ++l) {
      std::vector<double> ctx(P);
      double ms = 0;
      for (int64_t j = 0; j < P; ++j) {
        const std::vector<double> wr = Row(w.per_layer_model_projection, l * P + j);
        double acc = 0;
        for (int64_t i = 0; i < H; ++i) acc += wr[i] * h[i];
        ctx[j] = acc / std::sqrt(static_cast<double>(H));
        ms += ctx[j] * ctx[j];
      }
      const double inv = 1.0 / std::sqrt(ms / P + c.rms_norm_eps);
      for (int64_t j = 0; j < P; ++j) {
        const double want =
            (ctx[j] * inv * w.per_layer_projection_norm[j] + tok[l * P + j] * std::sqrt(static_cast<double>(P))) /
            std::sqrt(2.0);
        const double diff = std::fabs(want - got[(t * N + l) * P + j]);
        worst = std::max(worst, diff);
        ASSERT_LT(diff, 1e-4 * std::max(1.0, std::fabs(want))) << "token " << t << " layer " << l << " slot " << j;
      }
    }
  }
  std::printf("[ %s PLE ] max |diff| vs float64 reference = %.3g\n", name.c_str(), worst);
}

TEST(Ple, MatchesFloat64Reference) {
  ExpectPleMatchesReference("tiny-e");
  ExpectPleMatchesReference("tiny-e2");
}

// Counts appends, forwarding to the real cache.
class CountingCache : public LayerCache {
 public:
  explicit CountingCache(std::unique_ptr<LayerCache> inner) : inner_(std::move(inner)) {}
  KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) override {
    ++appends;
    return inner_->AppendAndView(k, v, pos, n);
  }
  int64_t offset() const override { return inner_->offset(); }
  size_t allocated_bytes() const override { return inner_->allocated_bytes(); }
  size_t bytes_per_token() const override { return inner_->bytes_per_token(); }
  std::string signature() const override { return inner_->signature(); }
  int appends = 0;

 private:
  std::unique_ptr<LayerCache> inner_;
};

TEST(KvSharing, SharedLayersOwnNoCacheAndReadTheirDonor) {
  auto ops = MakeCpuOps();
  for (const char* name : {"tiny-e", "tiny-e2"}) {
    auto m = Gemma4Model::Load(testing::TestDataPath(std::string("models/") + name), ops.get());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const Gemma4Config& c = (*m)->config();
    auto kv = SequenceKv::MakePlain(c);
    std::vector<CountingCache*> spies(c.num_hidden_layers, nullptr);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const LayerGeometry& g = c.layers[l];
      if (g.kv_shared) {
        EXPECT_EQ(kv->layer(l), nullptr) << name << " layer " << l;
        ASSERT_GE(g.donor, 0);
        ASSERT_LT(g.donor, c.first_kv_shared_layer());
        EXPECT_FALSE(c.layers[g.donor].kv_shared);
        EXPECT_EQ(c.layers[g.donor].type, g.type);
        // The donor is the last non-shared layer of the same type.
        for (int j = g.donor + 1; j < c.first_kv_shared_layer(); ++j) EXPECT_NE(c.layers[j].type, g.type);
      } else {
        ASSERT_NE(kv->layer(l), nullptr);
        auto spy = std::make_unique<CountingCache>(kv->ReleaseLayer(l));
        spies[l] = spy.get();
        kv->ReplaceLayer(l, std::move(spy));
      }
    }
    const int32_t ids[] = {5, 6, 7, 8};
    std::vector<float> logits(c.vocab_size);
    ASSERT_TRUE((*m)->Forward(ids, 4, *kv, logits.data(), false).ok());
    ASSERT_TRUE((*m)->Forward(ids, 1, *kv, logits.data(), false).ok());
    for (int l = 0; l < c.num_hidden_layers; ++l)
      if (spies[l]) EXPECT_EQ(spies[l]->appends, 2) << name << " layer " << l;
  }
}

}  // namespace
}  // namespace g4
