// KV caches under the real model graph (fixture models in testdata/models):
// rings against unbounded caches, KV-shared layers reading their donor's
// view of the current step, quality per mode (teacher-forced KL against
// plain), and delayed modes exact before their boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "backend/ops.h"
#include "kv/sequence_kv.h"
#include "model/gemma4_model.h"
#include "test_util.h"

namespace g4 {
namespace {

const char* const kFixtures[] = {"tiny-e", "tiny-e2", "tiny-dense", "tiny-moe", "tiny-e-q4", "tiny-moe-q4"};

class ModelKvTest : public ::testing::Test {
 protected:
  void Load(const std::string& name) {
    ops_ = MakeCpuOps();
    auto m = Gemma4Model::Load(testing::TestDataPath("models/" + name), ops_.get());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
  }
  std::vector<int32_t> Ids(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = static_cast<int32_t>(rng() % model_->vocab_size());
    return ids;
  }
  std::unique_ptr<SequenceKv> Kv(const std::string& spec, bool sliding_ring = true) {
    auto scheme = KvScheme::Parse(spec);
    EXPECT_TRUE(scheme.ok()) << scheme.status().ToString();
    scheme->sliding_ring = sliding_ring;
    auto kv = SequenceKv::Make(model_->config(), *scheme);
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    return std::move(kv).value();
  }
  // Logits [ids.size(), V]: the first `head` tokens prefilled in chunks of
  // `chunk`, the rest decoded one at a time (teacher forcing).
  std::vector<float> TeacherForced(SequenceKv& kv, const std::vector<int32_t>& ids, int64_t head, int64_t chunk) {
    const int64_t V = model_->vocab_size();
    std::vector<float> logits(ids.size() * V);
    Status s = model_->ForwardChunked(ids.data(), head, chunk, kv, logits.data(), true);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (size_t i = head; i < ids.size(); ++i) {
      s = model_->Forward(&ids[i], 1, kv, logits.data() + i * V, false);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    return logits;
  }
  // Mean KL(P || Q) over rows, and the fraction of rows with the same argmax.
  std::pair<double, double> KlAndTop1(const std::vector<float>& p_logits, const std::vector<float>& q_logits) const {
    const int64_t V = model_->vocab_size(), rows = static_cast<int64_t>(p_logits.size()) / V;
    double kl = 0;
    int64_t agree = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = &p_logits[r * V];
      const float* q = &q_logits[r * V];
      const double pm = *std::max_element(p, p + V), qm = *std::max_element(q, q + V);
      double ps = 0, qs = 0;
      for (int64_t i = 0; i < V; ++i) ps += std::exp(p[i] - pm), qs += std::exp(q[i] - qm);
      const double plse = pm + std::log(ps), qlse = qm + std::log(qs);
      for (int64_t i = 0; i < V; ++i) {
        const double lp = p[i] - plse, lq = q[i] - qlse;
        kl += std::exp(lp) * (lp - lq);
      }
      agree += (std::max_element(p, p + V) - p) == (std::max_element(q, q + V) - q);
    }
    return {kl / rows, static_cast<double>(agree) / rows};
  }

  std::unique_ptr<Ops> ops_;
  std::unique_ptr<Gemma4Model> model_;
};

TEST_F(ModelKvTest, RingCachesMatchUnboundedCachesOverSeveralWindows) {
  for (const char* name : kFixtures) {
    Load(name);
    const int window = model_->config().sliding_window;
    const auto ids = Ids(96, 7);
    ASSERT_GE(static_cast<int>(ids.size()), 5 * window);
    for (int64_t chunk : {7, 32}) {
      auto ring = Kv("plain"), unbounded = Kv("plain", false);
      const auto a = TeacherForced(*ring, ids, 40, chunk);
      const auto b = TeacherForced(*unbounded, ids, 40, chunk);
      // Bit-identical, not just within 1e-5: the attention kernels reduce over
      // visible keys in chronological order whatever the layout (ops.h EncodedKv).
      auto m = testing::Compare(b.data(), a.data(), a.size(), 0.0);
      EXPECT_TRUE(m.ok) << name << " chunk " << chunk << ": " << m.ToString();
      // The rings really are bounded: a sliding layer holds its window.
      for (int l = 0; l < ring->num_layers(); ++l)
        if (ring->layer(l) && model_->config().layers[l].type == AttentionType::kSliding) {
          EXPECT_EQ(ring->layer(l)->allocated_bytes(), window * ring->layer(l)->bytes_per_token()) << name;
          EXPECT_GT(unbounded->layer(l)->allocated_bytes(), ring->layer(l)->allocated_bytes()) << name;
        }
    }
  }
}

// Wraps a donor's cache: every view it hands out is tagged with its step, and
// every Attend through it is logged with that tag.
class SpyCache : public LayerCache {
 public:
  explicit SpyCache(std::unique_ptr<LayerCache> inner) : inner_(std::move(inner)) {}
  KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) override {
    KvView view = inner_->AppendAndView(k, v, pos, n);
    spy_.inner = view.attention;
    spy_.step = ++step_;
    view.attention = &spy_;
    return view;
  }
  int64_t offset() const override { return inner_->offset(); }
  size_t allocated_bytes() const override { return inner_->allocated_bytes(); }
  size_t bytes_per_token() const override { return inner_->bytes_per_token(); }
  std::string signature() const override { return inner_->signature(); }

  struct Spy : KvAttention {
    void Attend(Ops& ops, const AttentionArgs& q) const override {
      log->push_back(step);
      inner->Attend(ops, q);
    }
    const KvAttention* inner = nullptr;
    int step = 0;
    std::vector<int>* log = nullptr;
  } spy_;
  std::vector<int> log_;
  int step_ = 0;

 private:
  std::unique_ptr<LayerCache> inner_;
};

TEST_F(ModelKvTest, KvSharedLayersAttendOverTheirDonorsCurrentView) {
  for (const char* name : {"tiny-e", "tiny-e2"}) {
    Load(name);
    const Gemma4Config& c = model_->config();
    for (const char* spec : {"plain", "turbo:k8v3", "affine:4"}) {
      auto kv = Kv(spec);
      std::map<int, SpyCache*> spies;
      std::map<int, int> readers;  // donor -> layers attending over its view (itself included)
      for (int l = 0; l < c.num_hidden_layers; ++l) {
        const int donor = c.layers[l].kv_shared ? c.layers[l].donor : l;
        ++readers[donor];
        if (c.layers[l].kv_shared && !spies.count(donor)) {
          auto spy = std::make_unique<SpyCache>(kv->ReleaseLayer(donor));
          spy->spy_.log = &spy->log_;
          spies[donor] = spy.get();
          kv->ReplaceLayer(donor, std::move(spy));
        }
      }
      ASSERT_FALSE(spies.empty()) << name;
      const auto ids = Ids(20, 3);
      int step = 0;
      for (int64_t n : {6, 1, 1, 5, 1, 1, 1, 1, 1, 1, 1}) {
        std::vector<float> logits(c.vocab_size);
        for (auto& [d, s] : spies) s->log_.clear();
        ASSERT_TRUE(model_->Forward(&ids[step], n, *kv, logits.data(), false).ok());
        step += static_cast<int>(n);
        for (auto& [d, s] : spies) {
          // Donor and sharers all attended, each once, over this step's view.
          EXPECT_EQ(static_cast<int>(s->log_.size()), readers[d]) << name << " " << spec << " donor " << d;
          for (int tag : s->log_) EXPECT_EQ(tag, s->step_) << name << " " << spec << " donor " << d;
        }
      }
    }
  }
}

TEST_F(ModelKvTest, MoreBitsNeverLoseToFewerAndEveryModeIsReported) {
  const char* const kModes[] = {"affine:8", "affine:4", "affine:4:32", "turbo:k8v3", "turbo:k4v3"};
  for (const char* name : kFixtures) {
    Load(name);
    std::map<std::string, double> kl, top1;
    const int kPrompts = 2;
    for (uint32_t prompt = 0; prompt < kPrompts; ++prompt) {
      const auto ids = Ids(44, 100 + prompt);
      auto plain = Kv("plain");
      const auto ref = TeacherForced(*plain, ids, 16, 16);
      for (const char* mode : kModes) {
        auto kv = Kv(mode);
        const auto got = TeacherForced(*kv, ids, 16, 16);
        const auto [k, t] = KlAndTop1(ref, got);
        kl[mode] += k / kPrompts;
        top1[mode] += t / kPrompts;
      }
    }
    for (const char* mode : kModes) {
      std::printf("[ %s %-11s ] KL vs plain %.3e, top-1 agreement %.3f\n", name, mode, kl[mode], top1[mode]);
      EXPECT_TRUE(std::isfinite(kl[mode]));
      EXPECT_GT(kl[mode], 0.0) << name << " " << mode << " should not be lossless";
    }
    EXPECT_LE(kl["affine:8"], kl["affine:4"]) << name;
    EXPECT_LE(kl["turbo:k8v3"], kl["turbo:k4v3"]) << name;
  }
}

TEST_F(ModelKvTest, DelayedModesAreBitIdenticalToPlainBeforeTheirBoundary) {
  for (const char* name : kFixtures) {
    Load(name);
    const auto ids = Ids(48, 11);
    const int64_t V = model_->vocab_size();
    auto plain = Kv("plain");
    const auto ref = TeacherForced(*plain, ids, 10, 10);
    for (const char* mode : {"affine:4@24", "turbo:k4v3@24", "affine:8:32@24"}) {
      auto kv = Kv(mode);
      const auto got = TeacherForced(*kv, ids, 10, 10);
      // Row i is computed while the caches hold i tokens: plain up to 23.
      EXPECT_EQ(std::memcmp(ref.data(), got.data(), 24 * V * sizeof(float)), 0) << name << " " << mode;
      EXPECT_NE(std::memcmp(ref.data() + 24 * V, got.data() + 24 * V, 24 * V * sizeof(float)), 0)
          << name << " " << mode << " never converted";
      EXPECT_EQ(kv->minimum_reusable_offset(), 24) << name << " " << mode;
    }
  }
}

}  // namespace
}  // namespace g4
