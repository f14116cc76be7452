// GeluMul, Add, Scale, ScaleColumns and Softcap against double references,
// on contiguous and strided views, with the aliasing the contract allows,
// sizes that take the parallel paths, and batch invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::GeluTanhRef;
using testing::DeviceTensor;
using testing::kEps;

class ElementwiseTest : public testing::BackendTest {};

// (rows, cols, extra stride): empty, tiny, vector tails, one long row (the
// flat parallel path), many strided rows (the row-parallel path).
struct Shape {
  int64_t rows, cols, pad;
};
const Shape kShapes[] = {{0, 5, 0},  {1, 1, 0},     {3, 15, 0},    {2, 16, 3},    {7, 17, 0},
                         {5, 17, 9}, {2, 1000, 24}, {1, 100003, 0}, {40, 3001, 0}, {40, 3001, 5}};

TEST_P(ElementwiseTest, GeluMulWithAliasing) {
  uint32_t seed = 0;
  for (const Shape& s : kShapes) {
    const int64_t n = s.rows * s.cols, stride = s.cols + s.pad;
    for (int alias = 0; alias < 3; ++alias) {  // out separate, out == g, out == u
      std::vector<float> g = testing::RandomFloats(n, ++seed, -12.0f, 12.0f);
      const std::vector<float> u = testing::RandomFloats(n, ++seed, -3.0f, 3.0f);
      if (n > 3) g[3] = 1e-6f;  // near zero
      std::vector<double> ref(n), tol(n);
      for (int64_t i = 0; i < n; ++i) {
        ref[i] = GeluTanhRef(g[i]) * u[i];
        // float32 evaluation of the same formula: 1 + tanh cancels for large
        // negative inputs (as it does in torch), so allow eps * |x u| absolute.
        tol[i] = 8 * kEps * std::fabs(ref[i]) + kEps * std::fabs(g[i] * u[i]) + 1e-30;
      }
      DeviceTensor dg = testing::UploadF32(backend(), g, s.rows, s.cols, stride);
      DeviceTensor du = testing::UploadF32(backend(), u, s.rows, s.cols, stride);
      DeviceTensor dout = testing::AllocTensor(backend(), DType::kF32, s.rows, s.cols, stride);
      DeviceTensor& o = alias == 0 ? dout : alias == 1 ? dg : du;
      ops().GeluMul(dg.view, du.view, o.view);
      EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend(), o.view), tol, s.cols))
          << s.rows << "x" << s.cols << "+" << s.pad << " alias " << alias;
      EXPECT_TRUE(testing::GuardsIntact(backend(), o));
    }
  }
}

TEST_P(ElementwiseTest, AddWithAliasing) {
  uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    const int64_t n = s.rows * s.cols, stride = s.cols + s.pad;
    for (int alias = 0; alias < 3; ++alias) {
      const std::vector<float> a = testing::RandomFloats(n, ++seed), b = testing::RandomFloats(n, ++seed);
      std::vector<double> ref(n), tol(n, 0.0);
      for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<float>(a[i] + b[i]);  // one rounding: exact
      DeviceTensor da = testing::UploadF32(backend(), a, s.rows, s.cols, stride);
      // b contiguous while a and y are strided: layouts may differ per operand.
      DeviceTensor db = testing::UploadF32(backend(), b, s.rows, s.cols, alias == 2 ? stride : 0);
      DeviceTensor dy = testing::AllocTensor(backend(), DType::kF32, s.rows, s.cols, stride);
      DeviceTensor& o = alias == 0 ? dy : alias == 1 ? da : db;
      ops().Add(da.view, db.view, o.view);
      EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend(), o.view), tol, s.cols))
          << s.rows << "x" << s.cols << "+" << s.pad << " alias " << alias;
      EXPECT_TRUE(testing::GuardsIntact(backend(), o));
    }
  }
}

TEST_P(ElementwiseTest, ScaleIsOneRounding) {
  uint32_t seed = 200;
  for (const Shape& s : kShapes) {
    const int64_t n = s.rows * s.cols;
    const std::vector<float> x = testing::RandomFloats(n, ++seed, -100.0f, 100.0f);
    std::vector<double> ref(n), tol(n, 0.0);
    for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<float>(x[i] * 0.0883883f);
    DeviceTensor dx = testing::UploadF32(backend(), x, s.rows, s.cols, s.cols + s.pad);
    ops().Scale(dx.view, 0.0883883f);
    EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend(), dx.view), tol, s.cols))
        << s.rows << "x" << s.cols << "+" << s.pad;
    EXPECT_TRUE(testing::GuardsIntact(backend(), dx));
  }
}

TEST_P(ElementwiseTest, ScaleColumnsIsTwoRoundingsInOrder) {
  uint32_t seed = 300;
  for (const Shape& s : kShapes) {
    const int64_t n = s.rows * s.cols, stride = s.cols + s.pad;
    for (bool in_place : {false, true}) {
      const std::vector<float> x = testing::RandomFloats(n, ++seed, -50.0f, 50.0f);
      const std::vector<float> col = testing::RandomFloats(s.cols, ++seed, -2.0f, 2.0f);
      const float scale = 0.0625f * 1.3f;
      std::vector<double> ref(n), tol(n, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        // (x * col) * s in float: the documented order, so exact.
        const float xc = x[i] * col[i % s.cols];
        ref[i] = static_cast<float>(xc * scale);
      }
      DeviceTensor dx = testing::UploadF32(backend(), x, s.rows, s.cols, stride);
      const DeviceBuffer dcol = testing::UploadArray(backend(), col);
      DeviceTensor dy = testing::AllocTensor(backend(), DType::kF32, s.rows, s.cols, in_place ? stride : 0);
      DeviceTensor& o = in_place ? dx : dy;
      ops().ScaleColumns(dx.view, dcol.as<float>(), scale, o.view);
      EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend(), o.view), tol, s.cols))
          << s.rows << "x" << s.cols << "+" << s.pad << " in_place " << in_place;
      EXPECT_TRUE(testing::GuardsIntact(backend(), o));
    }
  }
}

TEST_P(ElementwiseTest, Softcap) {
  uint32_t seed = 400;
  for (float cap : {30.0f, 50.0f}) {
    for (const Shape& s : kShapes) {
      const int64_t n = s.rows * s.cols;
      std::vector<float> x = testing::RandomFloats(n, ++seed, -200.0f, 200.0f);
      if (n > 5) {
        x[0] = 1e-7f;
        x[1] = -3e-3f;
        x[2] = 0.0f;
        x[3] = 1e6f;
        x[4] = -INFINITY;
      }
      std::vector<double> ref(n), tol(n);
      for (int64_t i = 0; i < n; ++i) {
        ref[i] = cap * std::tanh(static_cast<double>(x[i]) / cap);
        tol[i] = 6 * kEps * std::fabs(ref[i]) + 1e-30;
      }
      DeviceTensor dx = testing::UploadF32(backend(), x, s.rows, s.cols, s.cols + s.pad);
      ops().Softcap(dx.view, cap);
      EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend(), dx.view), tol, s.cols))
          << s.rows << "x" << s.cols << "+" << s.pad << " cap " << cap;
      EXPECT_TRUE(testing::GuardsIntact(backend(), dx));
    }
  }
}

TEST_P(ElementwiseTest, NanPropagates) {
  // A NaN from upstream must stay visible, not be clamped into a number.
  std::vector<float> x(20, 1.0f);
  x[17] = NAN;
  DeviceTensor dx = testing::UploadF32(backend(), x, 2, 10);
  DeviceTensor du = testing::UploadF32(backend(), std::vector<float>(20, 1.0f), 2, 10);
  DeviceTensor dy = testing::AllocTensor(backend(), DType::kF32, 2, 10);
  ops().GeluMul(dx.view, du.view, dy.view);
  std::vector<float> y = testing::DownloadF32(backend(), dy.view);
  EXPECT_TRUE(std::isnan(y[17]));
  EXPECT_FALSE(std::isnan(y[16]));
  ops().Softcap(dx.view, 30.0f);
  EXPECT_TRUE(std::isnan(testing::DownloadF32(backend(), dx.view)[17]));
}

// Each op on a batch of random rows, then each row alone (in a strided
// single-row view): the row's bits must not change.
TEST_P(ElementwiseTest, RowsAloneEqualRowsInABatch) {
  const int64_t rows = 23, cols = 3001;  // the batch takes the flat parallel path
  const std::vector<float> a = testing::RandomFloats(rows * cols, 1, -9.0f, 9.0f);
  const std::vector<float> b = testing::RandomFloats(rows * cols, 2, -9.0f, 9.0f);
  const std::vector<float> col = testing::RandomFloats(cols, 3);
  const DeviceBuffer dcol = testing::UploadArray(backend(), col);
  using Op = std::function<void(Ops&, const TensorView& a, const TensorView& b, const TensorView& out)>;
  const std::pair<const char*, Op> cases[] = {
      {"GeluMul", [](Ops& o, const TensorView& x, const TensorView& y, const TensorView& z) { o.GeluMul(x, y, z); }},
      {"Add", [](Ops& o, const TensorView& x, const TensorView& y, const TensorView& z) { o.Add(x, y, z); }},
      {"Scale",
       [](Ops& o, const TensorView& x, const TensorView&, const TensorView& z) {
         o.Copy(x, z);
         o.Scale(z, 0.37f);
       }},
      {"ScaleColumns",
       [&](Ops& o, const TensorView& x, const TensorView&, const TensorView& z) {
         o.ScaleColumns(x, dcol.as<float>(), 1.7f, z);
       }},
      {"Softcap",
       [](Ops& o, const TensorView& x, const TensorView&, const TensorView& z) {
         o.Copy(x, z);
         o.Softcap(z, 5.0f);
       }},
  };
  for (const auto& [name, op] : cases) {
    DeviceTensor da = testing::UploadF32(backend(), a, rows, cols);
    DeviceTensor db = testing::UploadF32(backend(), b, rows, cols);
    DeviceTensor batch = testing::AllocTensor(backend(), DType::kF32, rows, cols);
    op(ops(), da.view, db.view, batch.view);
    const std::vector<float> want = testing::DownloadF32(backend(), batch.view);
    for (int64_t r : {int64_t{0}, int64_t{7}, rows - 1}) {
      DeviceTensor ra = testing::UploadF32(backend(), testing::SliceRows(a, cols, r, 1), 1, cols, cols + 11);
      DeviceTensor rb = testing::UploadF32(backend(), testing::SliceRows(b, cols, r, 1), 1, cols, cols + 11);
      DeviceTensor alone = testing::AllocTensor(backend(), DType::kF32, 1, cols);
      op(ops(), ra.view, rb.view, alone.view);
      EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(want, cols, r, 1),
                                        testing::DownloadF32(backend(), alone.view), cols))
          << name << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ElementwiseTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
