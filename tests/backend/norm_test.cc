// RmsNorm against y = x * (mean(x^2) + eps)^-1/2 * w in double, on
// contiguous and strided views, in place, and rows alone vs in a batch.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;
using testing::kEps;

class RmsNormTest : public testing::BackendTest {};

void CheckNorm(Backend& backend, int64_t rows, int64_t d, bool with_weight, bool in_place, int64_t pad, float eps) {
  const std::vector<float> x = testing::RandomFloats(rows * d, rows * 1000 + d, -3.0f, 3.0f);
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
  DeviceTensor dx = testing::UploadF32(backend, x, rows, d, d + pad);
  DeviceTensor dy = testing::AllocTensor(backend, DType::kF32, rows, d);
  const DeviceBuffer dw = testing::UploadArray(backend, w);
  DeviceTensor& out = in_place ? dx : dy;
  backend.ops().RmsNorm(dx.view, with_weight ? dw.as<float>() : nullptr, eps, out.view);
  EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend, out.view), tol, d))
      << "rows " << rows << " d " << d << " weight " << with_weight << " in_place " << in_place << " pad " << pad;
  EXPECT_TRUE(testing::GuardsIntact(backend, out));
}

TEST_P(RmsNormTest, ShapesWeightsAliasingStrides) {
  for (int64_t rows : {1, 3, 17, 300})
    // From 1024: one block per row on CUDA, up to 24 columns per thread in
    // registers (6400: the loop kernel).
    for (int64_t d : {1, 7, 64, 256, 1000, 1024, 2565, 5376, 6400})
      for (bool wt : {false, true})
        for (bool in_place : {false, true})
          for (int64_t pad : {0, 5}) CheckNorm(backend(), rows, d, wt, in_place, pad, 1e-6f);
}

TEST_P(RmsNormTest, EpsIsInsideTheRoot) {
  // All-zero rows: (0 + eps)^-1/2 * 0 = 0, and a tiny row is dominated by eps.
  DeviceTensor x = testing::UploadF32(backend(), std::vector<float>(8, 0.0f), 1, 8);
  DeviceTensor y = testing::AllocTensor(backend(), DType::kF32, 1, 8);
  ops().RmsNorm(x.view, nullptr, 1e-6f, y.view);
  for (float v : testing::DownloadF32(backend(), y.view)) EXPECT_EQ(v, 0.0f);
  testing::WriteRows(backend(), x.view, std::vector<float>(8, 1e-4f));  // mean(x^2) = 1e-8
  ops().RmsNorm(x.view, nullptr, 1e-2f, y.view);
  for (float v : testing::DownloadF32(backend(), y.view)) EXPECT_NEAR(v, 1e-4 / std::sqrt(1e-8 + 1e-2), 1e-9);
}

TEST_P(RmsNormTest, RowsAloneEqualRowsInABatch) {
  for (int64_t d : {1, 37, 2816}) {
    const int64_t rows = 61;
    const std::vector<float> x = testing::RandomFloats(rows * d, d + 7, -4.0f, 4.0f);
    const DeviceBuffer w = testing::UploadArray(backend(), testing::RandomFloats(d, d + 8));
    DeviceTensor dx = testing::UploadF32(backend(), x, rows, d);
    DeviceTensor batch = testing::AllocTensor(backend(), DType::kF32, rows, d);
    ops().RmsNorm(dx.view, w.as<float>(), 1e-6f, batch.view);
    const std::vector<float> want = testing::DownloadF32(backend(), batch.view);
    for (int64_t r : {int64_t{0}, int64_t{30}, rows - 1}) {
      DeviceTensor one = testing::UploadF32(backend(), testing::SliceRows(x, d, r, 1), 1, d, d + 3);
      ops().RmsNorm(one.view, w.as<float>(), 1e-6f, one.view);
      EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(want, d, r, 1), testing::DownloadF32(backend(), one.view),
                                        d))
          << "d " << d << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RmsNormTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
