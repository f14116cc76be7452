// Rope against rotate-half in double, with the angle formed as HF forms it:
// the float32 product float(pos) * inv_freq, then cos/sin of that float.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::kEps;

void CheckRope(Ops& ops, int64_t tokens, int heads, int head_dim, const std::vector<int32_t>& pos,
               const std::vector<float>& inv_freq) {
  const int half = head_dim / 2;
  std::vector<float> x = testing::RandomFloats(tokens * heads * head_dim, tokens + head_dim, -2.0f, 2.0f);
  std::vector<double> ref(x.size()), tol(x.size());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      const int64_t base = (t * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const volatile float angle = static_cast<float>(pos[t]) * inv_freq[i];  // fp32 product
        const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
        const double a = x[base + i], b = x[base + i + half];
        ref[base + i] = a * c - b * s;
        ref[base + i + half] = b * c + a * s;
        // cos/sin within 1 ulp, then two products and a sum.
        tol[base + i] = tol[base + i + half] = 4 * kEps * (std::fabs(a) + std::fabs(b)) + 1e-30;
      }
    }
  }
  ops.Rope(x.data(), tokens, heads, head_dim, pos.data(), inv_freq.data());
  EXPECT_TRUE(testing::AllWithin(ref, x.data(), tol, head_dim)) << tokens << "x" << heads << "x" << head_dim;
}

std::vector<float> GemmaInvFreq(int head_dim, double theta, int rotated) {
  // Proportional rope as in Gemma's full layers: `rotated` of head_dim/2
  // slots have frequencies, the rest are zero.
  std::vector<float> f(head_dim / 2, 0.0f);
  for (int i = 0; i < rotated; ++i) f[i] = static_cast<float>(1.0 / std::pow(theta, 2.0 * i / head_dim));
  return f;
}

TEST(RopeTest, MatchesFloat32Angles) {
  auto ops = MakeCpuOps();
  for (int head_dim : {2, 10, 64, 256, 512}) {
    for (int64_t tokens : {1, 3, 17}) {
      std::vector<int32_t> pos(tokens);
      for (int64_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>(t * 977 + (head_dim == 512 ? 120000 : 0));
      CheckRope(*ops, tokens, 3, head_dim, pos, GemmaInvFreq(head_dim, 10000.0, head_dim / 2));
      CheckRope(*ops, tokens, 2, head_dim, pos, GemmaInvFreq(head_dim, 1e6, head_dim / 8));
    }
  }
}

TEST(RopeTest, ZeroFrequencyIsExactPassThroughAndPositionZeroIsIdentity) {
  auto ops = MakeCpuOps();
  const int head_dim = 64;
  std::vector<float> inv(32, 0.0f);
  for (int i = 0; i < 8; ++i) inv[i] = 0.5f / (i + 1);
  const std::vector<float> x0 = testing::RandomFloats(2 * 4 * head_dim, 3);
  std::vector<float> x = x0;
  const std::vector<int32_t> pos = {0, 5000};
  ops->Rope(x.data(), 2, 4, head_dim, pos.data(), inv.data());
  for (int h = 0; h < 4; ++h) {
    for (int i = 0; i < head_dim; ++i) {
      EXPECT_EQ(x[h * head_dim + i], x0[h * head_dim + i]) << "position 0, head " << h << " dim " << i;
      const bool rotated = (i % 32) < 8;
      if (!rotated) {
        EXPECT_EQ(x[(4 + h) * head_dim + i], x0[(4 + h) * head_dim + i]) << "dim " << i;
      }
    }
  }
}

}  // namespace
}  // namespace g4
