// RmsNorm against y = x * (mean(x^2) + eps)^-1/2 * w in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::kEps;

void CheckNorm(Ops& ops, int64_t rows, int64_t d, bool with_weight, bool in_place, float eps) {
  std::vector<float> x = testing::RandomFloats(rows * d, rows * 1000 + d, -3.0f, 3.0f);
  const std::vector<float> w = testing::RandomFloats(d, d, -2.0f, 2.0f);
  std::vector<double> ref(rows * d), tol(rows * d);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) {
      ref[r * d + i] = x[r * d + i] * inv * (with_weight ? w[i] : 1.0);
      // Sum of squares within (d/8 + 8) eps relative, halved by the root,
      // plus a few roundings.
      tol[r * d + i] = ((d / 8.0 + 8) / 2 + 6) * kEps * std::fabs(ref[r * d + i]) + 1e-30;
    }
  }
  std::vector<float> y(rows * d + 1, NAN);
  y.back() = 5.0f;
  float* out = in_place ? x.data() : y.data();
  ops.RmsNorm(x.data(), rows, d, with_weight ? w.data() : nullptr, eps, out);
  EXPECT_TRUE(testing::AllWithin(ref, out, tol, d))
      << "rows " << rows << " d " << d << " weight " << with_weight << " in_place " << in_place;
  EXPECT_EQ(y.back(), 5.0f);
}

TEST(RmsNormTest, ShapesWeightsAliasing) {
  auto ops = MakeCpuOps();
  for (int64_t rows : {1, 3, 17, 300})
    for (int64_t d : {1, 7, 64, 256, 1000})
      for (bool wt : {false, true})
        for (bool in_place : {false, true}) CheckNorm(*ops, rows, d, wt, in_place, 1e-6f);
}

TEST(RmsNormTest, EpsIsInsideTheRoot) {
  // All-zero rows: (0 + eps)^-1/2 * 0 = 0, and a tiny row is dominated by eps.
  auto ops = MakeCpuOps();
  std::vector<float> x(8, 0.0f), y(8, NAN);
  ops->RmsNorm(x.data(), 1, 8, nullptr, 1e-6f, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
  x.assign(8, 1e-4f);  // mean(x^2) = 1e-8, so y = 1e-4 / sqrt(1e-8 + 1e-2)
  ops->RmsNorm(x.data(), 1, 8, nullptr, 1e-2f, y.data());
  for (float v : y) EXPECT_NEAR(v, 1e-4 / std::sqrt(1e-8 + 1e-2), 1e-9);
}

}  // namespace
}  // namespace g4
