// Attention against a double-precision softmax reference: GQA, sliding
// windows, keys stored in ring order (positions permuted), padded KV rows,
// decode (one query, keys split across threads) and prefill shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::kEps;

struct Case {
  int64_t num_queries, num_keys;
  int heads, kv_heads, head_dim, window;
  int64_t pad;  // extra floats per key row beyond kv_heads * head_dim
  float scale;
};

bool Visible(int64_t qp, int64_t kp, int window) { return kp <= qp && (window == 0 || kp > qp - window); }

void CheckAttention(Ops& ops, const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int d = c.head_dim, group = c.heads / c.kv_heads;
  const int64_t stride = static_cast<int64_t>(c.kv_heads) * d + c.pad;
  // Keys hold positions base .. base + num_keys - 1 in a rotated, then
  // shuffled order (a ring buffer that wrapped, plus arbitrary order).
  const int64_t base = 1000;
  std::vector<int32_t> k_pos(c.num_keys);
  std::iota(k_pos.begin(), k_pos.end(), static_cast<int32_t>(base));
  std::shuffle(k_pos.begin(), k_pos.end(), rng);
  // Queries: the last num_queries positions (prefill/decode at the end).
  std::vector<int32_t> q_pos(c.num_queries);
  for (int64_t i = 0; i < c.num_queries; ++i)
    q_pos[i] = static_cast<int32_t>(base + c.num_keys - c.num_queries + i);
  const std::vector<float> q = testing::RandomFloats(c.num_queries * c.heads * d, seed + 1);
  std::vector<float> k = testing::RandomFloats(c.num_keys * stride, seed + 2);
  std::vector<float> v = testing::RandomFloats(c.num_keys * stride, seed + 3);
  for (int64_t j = 0; j < c.num_keys; ++j) {  // padding must never be read
    for (int64_t p = c.kv_heads * d; p < stride; ++p) k[j * stride + p] = v[j * stride + p] = NAN;
  }

  std::vector<double> ref(c.num_queries * c.heads * d), tol(ref.size());
  for (int64_t i = 0; i < c.num_queries; ++i) {
    for (int h = 0; h < c.heads; ++h) {
      const int kh = h / group;
      const float* qh = &q[(i * c.heads + h) * d];
      std::vector<double> s;
      std::vector<int64_t> idx;
      double max_abs_dot = 0;
      for (int64_t j = 0; j < c.num_keys; ++j) {
        if (!Visible(q_pos[i], k_pos[j], c.window)) continue;
        double dot = 0, abs_dot = 0;
        for (int x = 0; x < d; ++x) {
          dot += static_cast<double>(qh[x]) * k[j * stride + kh * d + x];
          abs_dot += std::fabs(static_cast<double>(qh[x]) * k[j * stride + kh * d + x]);
        }
        s.push_back(c.scale * dot);
        idx.push_back(j);
        max_abs_dot = std::max(max_abs_dot, std::fabs(c.scale) * abs_dot);
      }
      ASSERT_FALSE(s.empty());
      const double m = *std::max_element(s.begin(), s.end());
      double l = 0;
      for (double& e : s) l += (e = std::exp(e - m));
      // Score error (dot in float) becomes relative error of each weight;
      // exp, normalization and the weighted sum add a few eps per key block.
      const double t = kEps * (64 + s.size() / 16.0 + 4 * max_abs_dot * (d / 8.0 + 8));
      for (int x = 0; x < d; ++x) {
        double o = 0;
        for (size_t n = 0; n < s.size(); ++n) o += s[n] / l * v[idx[n] * stride + kh * d + x];
        ref[(i * c.heads + h) * d + x] = o;
        tol[(i * c.heads + h) * d + x] = t;  // |v| <= 1
      }
    }
  }

  std::vector<float> out(ref.size() + 1, NAN);
  out.back() = 3.0f;
  AttentionArgs a;
  a.q = q.data();
  a.q_pos = q_pos.data();
  a.num_queries = c.num_queries;
  a.num_heads = c.heads;
  a.num_kv_heads = c.kv_heads;
  a.head_dim = d;
  a.k = k.data();
  a.v = v.data();
  a.k_pos = k_pos.data();
  a.num_keys = c.num_keys;
  a.kv_stride = stride;
  a.window = c.window;
  a.scale = c.scale;
  a.out = out.data();
  ops.Attention(a);
  EXPECT_TRUE(testing::AllWithin(ref, out.data(), tol, d))
      << "queries " << c.num_queries << " keys " << c.num_keys << " heads " << c.heads << "/" << c.kv_heads
      << " dim " << d << " window " << c.window << " pad " << c.pad;
  EXPECT_EQ(out.back(), 3.0f);
}

TEST(AttentionTest, DecodeAndPrefillShapes) {
  auto ops = MakeCpuOps();
  uint32_t seed = 1;
  for (auto [heads, kv] : {std::pair{8, 2}, std::pair{4, 4}, std::pair{6, 1}}) {
    for (int d : {16, 100, 256}) {
      for (int64_t nk : {1, 50, 300, 1100}) {
        for (int64_t nq : {int64_t{1}, int64_t{5}, int64_t{37}}) {
          if (nq > nk) continue;
          for (int window : {0, 7, 128}) {
            const int64_t pad = (seed % 3 == 0) ? 0 : 3 + static_cast<int64_t>(seed % 2) * d;
            const float scale = seed % 2 ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
            CheckAttention(*ops, Case{nq, nk, heads, kv, d, window, pad, scale}, ++seed);
          }
        }
      }
    }
  }
}

TEST(AttentionTest, LongDecode) {
  auto ops = MakeCpuOps();
  CheckAttention(*ops, Case{1, 5000, 8, 1, 256, 0, 0, 1.0f / 16}, 99);
  CheckAttention(*ops, Case{1, 5000, 8, 2, 128, 1024, 16, 1.0f}, 98);
}

TEST(AttentionTest, QueryWithoutVisibleKeysGivesZeros) {
  // Impossible in the model (a query sees itself), but must not be NaN.
  auto ops = MakeCpuOps();
  const int d = 32;
  for (int64_t nk : {10, 3000}) {  // single range and split ranges
    std::vector<float> q = testing::RandomFloats(2 * 2 * d, 1), k = testing::RandomFloats(nk * 2 * d, 2),
                       v = testing::RandomFloats(nk * 2 * d, 3);
    std::vector<int32_t> k_pos(nk);
    std::iota(k_pos.begin(), k_pos.end(), 100);
    const std::vector<int32_t> q_pos = {50, 100};  // first sees nothing; second sees key 100 only
    std::vector<float> out(2 * 2 * d, NAN);
    AttentionArgs a;
    a.q = q.data();
    a.q_pos = q_pos.data();
    a.num_queries = 2;
    a.num_heads = 2;
    a.num_kv_heads = 2;
    a.head_dim = d;
    a.k = k.data();
    a.v = v.data();
    a.k_pos = k_pos.data();
    a.num_keys = nk;
    a.kv_stride = 2 * d;
    a.scale = 0.2f;
    a.out = out.data();
    ops->Attention(a);
    for (int x = 0; x < 2 * d; ++x) EXPECT_EQ(out[x], 0.0f) << x;
    for (int h = 0; h < 2; ++h)
      for (int x = 0; x < d; ++x) EXPECT_NEAR(out[(2 + h) * d + x], v[h * d + x], 1e-6);
  }
}

}  // namespace
}  // namespace g4
