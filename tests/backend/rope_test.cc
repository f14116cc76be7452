// Rope against rotate-half in double, with the angle formed as HF forms it:
// the float32 product float(pos) * inv_freq, then cos/sin of that float. On
// contiguous and strided views (q inside a wider qkv row), and rows alone vs
// in a batch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;
using testing::kEps;

class RopeTest : public testing::BackendTest {};

void CheckRope(Backend& backend, int64_t tokens, int heads, int head_dim, const std::vector<int32_t>& pos,
               const std::vector<float>& inv_freq, int64_t pad) {
  const int half = head_dim / 2;
  const int64_t width = static_cast<int64_t>(heads) * head_dim;
  const std::vector<float> x = testing::RandomFloats(tokens * width, tokens + head_dim, -2.0f, 2.0f);
  std::vector<double> ref(x.size()), tol(x.size());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      const int64_t base = t * width + h * head_dim;
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
  DeviceTensor dx = testing::UploadF32(backend, x, tokens, width, width + pad);
  const DeviceBuffer dpos = testing::UploadArray(backend, pos);
  const DeviceBuffer dinv = testing::UploadArray(backend, inv_freq);
  backend.ops().Rope(dx.view, heads, head_dim, dpos.as<int32_t>(), dinv.as<float>());
  EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend, dx.view), tol, head_dim))
      << tokens << "x" << heads << "x" << head_dim << " pad " << pad;
  EXPECT_TRUE(testing::GuardsIntact(backend, dx));
}

std::vector<float> GemmaInvFreq(int head_dim, double theta, int rotated) {
  // Proportional rope as in Gemma's full layers: `rotated` of head_dim/2
  // slots have frequencies, the rest are zero.
  std::vector<float> f(head_dim / 2, 0.0f);
  for (int i = 0; i < rotated; ++i) f[i] = static_cast<float>(1.0 / std::pow(theta, 2.0 * i / head_dim));
  return f;
}

TEST_P(RopeTest, MatchesFloat32Angles) {
  for (int head_dim : {2, 10, 64, 256, 512}) {
    for (int64_t tokens : {1, 3, 17}) {
      std::vector<int32_t> pos(tokens);
      for (int64_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>(t * 977 + (head_dim == 512 ? 120000 : 0));
      CheckRope(backend(), tokens, 3, head_dim, pos, GemmaInvFreq(head_dim, 10000.0, head_dim / 2), 0);
      CheckRope(backend(), tokens, 2, head_dim, pos, GemmaInvFreq(head_dim, 1e6, head_dim / 8), 0);
      CheckRope(backend(), tokens, 2, head_dim, pos, GemmaInvFreq(head_dim, 1e4, head_dim / 2), 2 * head_dim + 3);
    }
  }
}

TEST_P(RopeTest, ZeroFrequencyIsExactPassThroughAndPositionZeroIsIdentity) {
  const int head_dim = 64;
  std::vector<float> inv(32, 0.0f);
  for (int i = 0; i < 8; ++i) inv[i] = 0.5f / (i + 1);
  const std::vector<float> x0 = testing::RandomFloats(2 * 4 * head_dim, 3);
  DeviceTensor x = testing::UploadF32(backend(), x0, 2, 4 * head_dim);
  const DeviceBuffer pos = testing::UploadArray(backend(), std::vector<int32_t>{0, 5000});
  const DeviceBuffer dinv = testing::UploadArray(backend(), inv);
  ops().Rope(x.view, 4, head_dim, pos.as<int32_t>(), dinv.as<float>());
  const std::vector<float> got = testing::DownloadF32(backend(), x.view);
  for (int h = 0; h < 4; ++h) {
    for (int i = 0; i < head_dim; ++i) {
      EXPECT_EQ(got[h * head_dim + i], x0[h * head_dim + i]) << "position 0, head " << h << " dim " << i;
      const bool rotated = (i % 32) < 8;
      if (!rotated) {
        EXPECT_EQ(got[(4 + h) * head_dim + i], x0[(4 + h) * head_dim + i]) << "dim " << i;
      }
    }
  }
}

TEST_P(RopeTest, RowsAloneEqualRowsInABatch) {
  const int heads = 8, head_dim = 256;
  const int64_t rows = 41, width = heads * head_dim;
  std::mt19937 rng(5);
  std::vector<int32_t> pos(rows);
  for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 100000);
  const std::vector<float> x = testing::RandomFloats(rows * width, 9);
  const DeviceBuffer inv = testing::UploadArray(backend(), GemmaInvFreq(head_dim, 1e6, head_dim / 4));
  const DeviceBuffer dpos = testing::UploadArray(backend(), pos);
  DeviceTensor batch = testing::UploadF32(backend(), x, rows, width);
  ops().Rope(batch.view, heads, head_dim, dpos.as<int32_t>(), inv.as<float>());
  const std::vector<float> want = testing::DownloadF32(backend(), batch.view);
  for (int64_t r : {int64_t{0}, int64_t{20}, rows - 1}) {
    DeviceTensor one = testing::UploadF32(backend(), testing::SliceRows(x, width, r, 1), 1, width, width + 64);
    const DeviceBuffer p = testing::UploadArray(backend(), std::vector<int32_t>{pos[r]});
    ops().Rope(one.view, heads, head_dim, p.as<int32_t>(), inv.as<float>());
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(want, width, r, 1), testing::DownloadF32(backend(), one.view),
                                      width))
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RopeTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
