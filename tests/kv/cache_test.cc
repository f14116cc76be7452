// Layer caches: attention on encoded K/V against a float64 reference over the
// decoded K/V, the optional view ports, rings against unbounded caches,
// exact byte accounting, trim/clone, delayed conversion and signatures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "core/float16.h"
#include "kv/caches.h"
#include "kv/kv_codec.h"
#include "kv/kv_scheme.h"
#include "test_util.h"

namespace g4 {
namespace {

struct Geometry {
  int heads = 4, kv_heads = 2, head_dim = 64;
  int64_t width() const { return static_cast<int64_t>(kv_heads) * head_dim; }
};

// Attention in float64 straight from the definition (ops.h AttentionArgs).
std::vector<float> ReferenceAttention(const Geometry& g, const float* q, const int32_t* q_pos, int64_t nq,
                                      const float* k, const float* v, const int32_t* k_pos, int64_t nk, int window) {
  std::vector<float> out(nq * g.heads * g.head_dim);
  const int group = g.heads / g.kv_heads;
  for (int64_t i = 0; i < nq; ++i)
    for (int h = 0; h < g.heads; ++h) {
      const int kh = h / group;
      std::vector<double> s(nk, -std::numeric_limits<double>::infinity());
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < nk; ++j) {
        if (k_pos[j] > q_pos[i] || (window > 0 && k_pos[j] <= q_pos[i] - window)) continue;
        double d = 0;
        for (int e = 0; e < g.head_dim; ++e)
          d += static_cast<double>(q[(i * g.heads + h) * g.head_dim + e]) * k[j * g.width() + kh * g.head_dim + e];
        s[j] = d;
        mx = std::max(mx, d);
      }
      double l = 0;
      std::vector<double> acc(g.head_dim, 0.0);
      for (int64_t j = 0; j < nk; ++j) {
        if (std::isinf(s[j])) continue;
        const double p = std::exp(s[j] - mx);
        l += p;
        for (int e = 0; e < g.head_dim; ++e) acc[e] += p * v[j * g.width() + kh * g.head_dim + e];
      }
      for (int e = 0; e < g.head_dim; ++e) out[(i * g.heads + h) * g.head_dim + e] = static_cast<float>(acc[e] / l);
    }
  return out;
}

AttentionArgs Query(const Geometry& g, const std::vector<float>& q, const std::vector<int32_t>& q_pos, int window,
                    std::vector<float>* out) {
  AttentionArgs a;
  a.q = q.data();
  a.q_pos = q_pos.data();
  a.num_queries = static_cast<int64_t>(q_pos.size());
  a.num_heads = g.heads;
  a.num_kv_heads = g.kv_heads;
  a.head_dim = g.head_dim;
  a.window = window;
  a.scale = 1.0f;
  out->assign(q_pos.size() * g.heads * g.head_dim, 0.0f);
  a.out = out->data();
  return a;
}

// Decoded chronological K/V of a cache, via its donor-capture capability.
DonorRows Decoded(LayerCache& c) {
  EXPECT_NE(c.donor_capture(), nullptr);
  return c.donor_capture()->CaptureDonorRows();
}

const KvCodecSpec kAllCodecs[] = {KvCodecSpec::Plain(),      KvCodecSpec::Affine(8, 64), KvCodecSpec::Affine(4, 64),
                                  KvCodecSpec::Affine(4, 32), KvCodecSpec::Turbo(8, 3),  KvCodecSpec::Turbo(4, 3),
                                  KvCodecSpec::Turbo(8, 8),   KvCodecSpec::Turbo(2, 2),  KvCodecSpec::Turbo(5, 5),
                                  KvCodecSpec::Affine(8, 128)};

// Attention through every codec's view equals float64 attention over what
// the codec decodes (so the kernels on packed codes are exact up to float
// rounding), for prefill chunks and decode steps, contiguous and ring.
TEST(CacheAttention, EncodedViewsMatchReferenceOverDecodedKv) {
  auto ops = MakeCpuOps();
  const Geometry g;
  uint32_t seed = 1;
  for (const KvCodecSpec& spec : kAllCodecs) {
    for (int window : {0, 16}) {
      auto made = MakeLayerCache({spec, -1}, g.kv_heads, g.head_dim, window);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      LayerCache& cache = **made;
      int32_t next = 0;
      for (int64_t n : {5, 1, 12, 1, 1, 20, 1}) {
        const auto k = testing::RandomFloats(n * g.width(), ++seed, -2, 2);
        const auto v = testing::RandomFloats(n * g.width(), ++seed, -2, 2);
        const auto q = testing::RandomFloats(n * g.heads * g.head_dim, ++seed, -0.5, 0.5);
        std::vector<int32_t> pos(n);
        for (auto& p : pos) p = next++;
        const DonorRows held = Decoded(cache);  // before the append: a ring chunk may overwrite visible keys
        const KvView view = cache.AppendAndView(k.data(), v.data(), pos.data(), n);
        ASSERT_NE(view.attention, nullptr);
        EXPECT_EQ(view.k != nullptr, spec.kind == KvCodecSpec::Kind::kPlain);
        std::vector<float> got;
        AttentionArgs a = Query(g, q, pos, window, &got);
        view.attention->Attend(*ops, a);
        // The keys the queries may see: what the cache held, decoded, plus
        // this chunk's own keys, decoded through a fresh cache.
        auto fresh = MakeLayerCache({spec, -1}, g.kv_heads, g.head_dim, 0);
        (*fresh)->AppendAndView(k.data(), v.data(), pos.data(), n);
        DonorRows now = Decoded(**fresh);
        std::vector<float> dk, dv;
        std::vector<int32_t> dpos;
        for (size_t j = 0; j < held.pos.size(); ++j)
          {
            dk.insert(dk.end(), held.k.begin() + j * g.width(), held.k.begin() + (j + 1) * g.width());
            dv.insert(dv.end(), held.v.begin() + j * g.width(), held.v.begin() + (j + 1) * g.width());
            dpos.push_back(held.pos[j]);
          }
        dk.insert(dk.end(), now.k.begin(), now.k.end());
        dv.insert(dv.end(), now.v.begin(), now.v.end());
        dpos.insert(dpos.end(), now.pos.begin(), now.pos.end());
        const auto want = ReferenceAttention(g, q.data(), pos.data(), n, dk.data(), dv.data(), dpos.data(),
                                             static_cast<int64_t>(dpos.size()), window);
        auto m = testing::Compare(want.data(), got.data(), want.size(), 2e-5, 2e-5);
        ASSERT_TRUE(m.ok) << spec.signature() << " window " << window << " chunk " << n << ": " << m.ToString();
      }
    }
  }
}

// Decode over many keys takes the kernel's split path (key ranges merged by
// log-sum-exp); rings there must still equal unbounded caches bit for bit.
TEST(CacheAttention, LongDecodeSplitsMatchReferenceAndRingsMatchUnbounded) {
  auto ops = MakeCpuOps();
  const Geometry g;
  const int64_t n = 900;
  const int window = 700;
  const auto k = testing::RandomFloats(n * g.width(), 71, -2, 2), v = testing::RandomFloats(n * g.width(), 72, -2, 2);
  const auto q = testing::RandomFloats(g.heads * g.head_dim, 73, -0.5, 0.5);
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i);
  for (const KvCodecSpec& spec : {KvCodecSpec::Plain(), KvCodecSpec::Affine(4, 64), KvCodecSpec::Turbo(8, 3)}) {
    auto full = MakeLayerCache({spec, -1}, g.kv_heads, g.head_dim, 0);
    auto ring = MakeLayerCache({spec, -1}, g.kv_heads, g.head_dim, window);
    ASSERT_TRUE(full.ok() && ring.ok());
    (*full)->AppendAndView(k.data(), v.data(), pos.data(), n - 1);
    (*ring)->AppendAndView(k.data(), v.data(), pos.data(), 500);
    for (int64_t t = 500; t < n - 1; t += 37)
      (*ring)->AppendAndView(k.data() + t * g.width(), v.data() + t * g.width(), pos.data() + t, std::min<int64_t>(37, n - 1 - t));
    const float* kl = k.data() + (n - 1) * g.width();
    const float* vl = v.data() + (n - 1) * g.width();
    const KvView fv = (*full)->AppendAndView(kl, vl, &pos[n - 1], 1);
    const KvView rv = (*ring)->AppendAndView(kl, vl, &pos[n - 1], 1);
    const std::vector<int32_t> qpos = {pos[n - 1]};
    for (int w : {0, window}) {
      std::vector<float> a, b;
      fv.attention->Attend(*ops, Query(g, q, qpos, w, &a));
      if (w) {
        rv.attention->Attend(*ops, Query(g, q, qpos, w, &b));
        EXPECT_EQ(a, b) << spec.signature() << ": ring differs from unbounded";
      }
      const DonorRows rows = (*full)->donor_capture()->CaptureDonorRows();
      const auto want = ReferenceAttention(g, q.data(), qpos.data(), 1, rows.k.data(), rows.v.data(), rows.pos.data(),
                                           static_cast<int64_t>(rows.pos.size()), w);
      auto m = testing::Compare(want.data(), a.data(), want.size(), 2e-5, 2e-5);
      EXPECT_TRUE(m.ok) << spec.signature() << " window " << w << ": " << m.ToString();
    }
  }
}

TEST(CacheAttention, RotatedValueViewDefersTheInverseRotation) {
  auto ops = MakeCpuOps();
  const Geometry g;
  auto made = MakeLayerCache({KvCodecSpec::Turbo(8, 3), -1}, g.kv_heads, g.head_dim, 0);
  ASSERT_TRUE(made.ok());
  const int64_t n = 9;
  const auto k = testing::RandomFloats(n * g.width(), 11), v = testing::RandomFloats(n * g.width(), 12);
  const auto q = testing::RandomFloats(n * g.heads * g.head_dim, 13);
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  const KvView view = (*made)->AppendAndView(k.data(), v.data(), pos.data(), n);
  const RotatedValueView* rot = view.attention->rotated_values();
  ASSERT_NE(rot, nullptr);
  EXPECT_EQ(view.attention->quantized(), nullptr);
  std::vector<float> eager, deferred;
  view.attention->Attend(*ops, Query(g, q, pos, 0, &eager));
  AttentionArgs a = Query(g, q, pos, 0, &deferred);
  rot->AttendRotated(*ops, a);
  auto differs = testing::Compare(eager.data(), deferred.data(), eager.size(), 1e-3);
  EXPECT_FALSE(differs.ok) << "output of AttendRotated should still be rotated";
  rot->RestoreValues(*ops, deferred.data(), n * g.heads, g.head_dim);
  auto m = testing::Compare(eager.data(), deferred.data(), eager.size(), 1e-6, 1e-6);
  EXPECT_TRUE(m.ok) << m.ToString();
}

TEST(CacheAttention, QuantizedViewExposesTheAffinePlanes) {
  const Geometry g;
  auto made = MakeLayerCache({KvCodecSpec::Affine(4, 32), -1}, g.kv_heads, g.head_dim, 0);
  ASSERT_TRUE(made.ok());
  const auto k = testing::RandomFloats(3 * g.width(), 21), v = testing::RandomFloats(3 * g.width(), 22);
  const int32_t pos[] = {0, 1, 2};
  const KvView view = (*made)->AppendAndView(k.data(), v.data(), pos, 3);
  const QuantizedKvView* qv = view.attention->quantized();
  ASSERT_NE(qv, nullptr);
  EXPECT_EQ(view.attention->rotated_values(), nullptr);
  EXPECT_EQ(qv->format.bits, 4);
  EXPECT_EQ(qv->format.group_size, 32);
  EXPECT_EQ(qv->kv.num_keys, 3);
  // Record = 2 x (codes W/2 + fp16 scales and biases 2 x 2 W/32).
  EXPECT_EQ(qv->kv.record_bytes, 2 * (g.width() / 2 + 4 * g.width() / 32));
  // Key 1, element 5: bias + step x code, from the planes by hand.
  const uint8_t* rec = qv->kv.records + qv->kv.record_bytes;
  const int code = rec[qv->format.k_codes + 2] >> 4;  // element 5 = high nibble of byte 2
  uint16_t s16, b16;
  std::memcpy(&s16, rec + qv->format.k_scales, 2);
  std::memcpy(&b16, rec + qv->format.k_biases, 2);
  const float x = F16ToF32(b16) + F16ToF32(s16) * code;
  EXPECT_NEAR(x, k[g.width() + 5], 0.5f * F16ToF32(s16) + 1e-6f);
}

}  // namespace
}  // namespace g4
