// Unit tests of two Gemma 4 specifics: the per-layer-input (PLE) block
// against a float64 reference computed straight from the weights, and the
// KV-sharing wiring (shared layers own no cache and never append).
#include <gtest/gtest.h>

#include <cmath>

#include "model/model_runner.h"
#include "test_util.h"

namespace g4 {
namespace {

std::vector<double> Row(const WeightMatrix& w, int64_t r) {
  std::vector<float> f(w.cols);
  DequantizeRow(w, r, f.data());
  return std::vector<double>(f.begin(), f.end());
}

void ExpectPleMatchesReference(const std::string& name) {
  testing::ModelRunner runner(name);
  ASSERT_TRUE(runner.ok());
  // The reference reads the placed weights on the host.
  if (runner.backend().space() != MemorySpace::kHost) GTEST_SKIP() << "weights live on the device";
  Gemma4Model& model = runner.model();
  const Gemma4Config& c = model.config();
  const Gemma4Weights& w = model.weights();
  const std::vector<int32_t> ids = {3, 250, 17, 511, 0};
  auto per_layer = model.PerLayerInputs(ids);
  ASSERT_TRUE(per_layer.ok()) << per_layer.status().ToString();
  const std::vector<float>& got = *per_layer;
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

TEST(KvSharing, SharedLayersReadTheirDonorsStorage) {
  for (const char* name : {"tiny-e", "tiny-e2"}) {
    testing::ModelRunner runner(name);
    ASSERT_TRUE(runner.ok());
    const Gemma4Config& c = runner.model().config();
    KvStepTables none;
    int shared = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const LayerGeometry& g = c.layers[l];
      if (!g.kv_shared) continue;
      ++shared;
      ASSERT_GE(g.donor, 0);
      ASSERT_LT(g.donor, c.first_kv_shared_layer());
      EXPECT_FALSE(c.layers[g.donor].kv_shared);
      EXPECT_EQ(c.layers[g.donor].type, g.type);
      // The donor is the last non-shared layer of the same type.
      for (int j = g.donor + 1; j < c.first_kv_shared_layer(); ++j) EXPECT_NE(c.layers[j].type, g.type);
      // It owns no storage: its K/V is the donor's, the same bytes.
      const PagedKv mine = runner.pool().LayerKv(l, none), donor = runner.pool().LayerKv(g.donor, none);
      EXPECT_EQ(mine.store[0].records, donor.store[0].records) << name << " layer " << l;
      EXPECT_EQ(runner.pool().group_of_layer(l), runner.pool().group_of_layer(g.donor));
    }
    EXPECT_EQ(shared, c.num_kv_shared_layers) << name;
  }
}

}  // namespace
}  // namespace g4
