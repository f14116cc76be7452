// GeluMul, Add, Scale, Softcap against double references, including the
// aliasing the contract allows and lengths that take the parallel path.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::kEps;

const int64_t kSizes[] = {0, 1, 15, 16, 17, 1000, 100003};

double Gelu(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(ElementwiseTest, GeluMulWithAliasing) {
  auto ops = MakeCpuOps();
  for (int64_t n : kSizes) {
    for (int alias = 0; alias < 3; ++alias) {  // out separate, out == g, out == u
      std::vector<float> g = testing::RandomFloats(n, n + 1, -12.0f, 12.0f);
      std::vector<float> u = testing::RandomFloats(n, n + 2, -3.0f, 3.0f);
      if (n > 3) g[3] = 1e-6f;  // near zero
      std::vector<double> ref(n), tol(n);
      for (int64_t i = 0; i < n; ++i) {
        ref[i] = Gelu(g[i]) * u[i];
        // float32 evaluation of the same formula: 1 + tanh cancels for large
        // negative inputs (as it does in torch), so allow eps * |x u| absolute.
        tol[i] = 8 * kEps * std::fabs(ref[i]) + kEps * std::fabs(g[i] * u[i]) + 1e-30;
      }
      std::vector<float> out(n + 1, NAN);
      float* o = alias == 0 ? out.data() : alias == 1 ? g.data() : u.data();
      ops->GeluMul(g.data(), u.data(), n, o);
      EXPECT_TRUE(testing::AllWithin(ref, o, tol)) << "n " << n << " alias " << alias;
    }
  }
}

TEST(ElementwiseTest, AddWithAliasing) {
  auto ops = MakeCpuOps();
  for (int64_t n : kSizes) {
    for (int alias = 0; alias < 3; ++alias) {
      std::vector<float> a = testing::RandomFloats(n, n + 3), b = testing::RandomFloats(n, n + 4);
      std::vector<double> ref(n), tol(n);
      for (int64_t i = 0; i < n; ++i) {
        ref[i] = static_cast<float>(a[i] + b[i]);  // one float rounding: exact match expected
        tol[i] = 0;
      }
      std::vector<float> y(n + 1, NAN);
      float* o = alias == 0 ? y.data() : alias == 1 ? a.data() : b.data();
      ops->Add(a.data(), b.data(), n, o);
      EXPECT_TRUE(testing::AllWithin(ref, o, tol)) << "n " << n << " alias " << alias;
    }
  }
}

TEST(ElementwiseTest, ScaleIsOneRounding) {
  auto ops = MakeCpuOps();
  for (int64_t n : kSizes) {
    std::vector<float> x = testing::RandomFloats(n, n + 5, -100.0f, 100.0f);
    std::vector<double> ref(n), tol(n, 0.0);
    for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<float>(x[i] * 0.0883883f);
    ops->Scale(x.data(), n, 0.0883883f);
    EXPECT_TRUE(testing::AllWithin(ref, x.data(), tol)) << "n " << n;
  }
}

TEST(ElementwiseTest, Softcap) {
  auto ops = MakeCpuOps();
  for (float cap : {30.0f, 50.0f}) {
    for (int64_t n : kSizes) {
      std::vector<float> x = testing::RandomFloats(n, n + 6, -200.0f, 200.0f);
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
      ops->Softcap(x.data(), n, cap);
      EXPECT_TRUE(testing::AllWithin(ref, x.data(), tol)) << "n " << n << " cap " << cap;
    }
  }
}

TEST(ElementwiseTest, NanPropagates) {
  // A NaN from upstream must stay visible, not be clamped into a number.
  auto ops = MakeCpuOps();
  std::vector<float> x(20, 1.0f), u(20, 1.0f);
  x[17] = NAN;
  std::vector<float> y = x;
  ops->Softcap(y.data(), 20, 30.0f);
  EXPECT_TRUE(std::isnan(y[17]));
  ops->GeluMul(x.data(), u.data(), 20, y.data());
  EXPECT_TRUE(std::isnan(y[17]));
  EXPECT_FALSE(std::isnan(y[16]));
}

}  // namespace
}  // namespace g4
