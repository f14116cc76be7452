// The CPU backend's kernel variants (backend/cpu/isa.h: avx512, avx2,
// baseline) against each other, every variant this machine can run forced
// in turn on the same inputs. (The whole backend suite also runs on each
// variant: backend_registry.cc.)
//  - MatMul over affine weights follows an integer scheme whose float steps
//    are per output element (backend/cpu/affine_int8.h): identical bits on
//    every variant, whatever the batch.
//  - Everything else sums in vector-width-dependent orders: the variants
//    agree to float32 rounding (relative to the terms' magnitudes).
// And the variant picked at start-up honours G4_CPU and says so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;
using testing::kEps;

std::vector<CpuKernels> Variants() {
  std::vector<CpuKernels> v;
  for (CpuKernels k : {CpuKernels::kAvx512, CpuKernels::kAvx2, CpuKernels::kBaseline}) {
    if (CpuKernelsSupported(k)) v.push_back(k);
  }
  return v;
}

std::vector<float> MatMulOn(CpuKernels k, const testing::TestWeights& tw, const std::vector<float>& x,
                            int64_t m) {
  std::unique_ptr<Backend> b = MakeCpuBackend(k);
  const testing::DeviceWeights dw = testing::UploadWeights(*b, tw);
  DeviceTensor dx = testing::UploadF32(*b, x, m, tw.w.cols);
  DeviceTensor dy = testing::AllocTensor(*b, DType::kF32, m, tw.w.rows);
  b->ops().MatMul(dx.view, dw.w, dy.view);
  return testing::DownloadF32(*b, dy.view);
}

TEST(CpuVariantsTest, BaselineIsAlwaysSupportedAndAutoPicksASupportedOne) {
  EXPECT_TRUE(CpuKernelsSupported(CpuKernels::kBaseline));
  EXPECT_TRUE(CpuKernelsSupported(AutoCpuKernels()));
  EXPECT_NE(AutoCpuKernels(), CpuKernels::kAuto);
  const std::string d = MakeCpuBackend()->Describe();
  EXPECT_NE(d.find(std::string(CpuKernelsName(AutoCpuKernels())) + " kernels"), std::string::npos) << d;
  // The best supported variant comes first: the auto pick is it unless G4_CPU says otherwise.
  if (std::getenv("G4_CPU") == nullptr) {
    EXPECT_EQ(AutoCpuKernels(), Variants().front());
  }
}

TEST(CpuVariantsTest, AffineMatMulIsBitIdenticalAcrossVariants) {
  const std::vector<CpuKernels> variants = Variants();
  uint32_t seed = 900;
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int group : {32, 64, 128}) {
      const int64_t k = group * (bits % 2 ? 5 : 12), n = 37;
      const testing::TestWeights tw = testing::MakeAffine(n, k, bits, group, DType::kBF16, ++seed);
      for (int64_t m : {1, 3, 21}) {
        std::vector<float> x = testing::RandomFloats(m * k, ++seed);
        x[0] *= 300.0f;  // one large input: its group's step is coarse
        const std::vector<float> want = MatMulOn(variants[0], tw, x, m);
        for (size_t v = 1; v < variants.size(); ++v) {
          EXPECT_TRUE(testing::BitwiseEqual(want, MatMulOn(variants[v], tw, x, m), n))
              << tw.w.Describe() << " m=" << m << ": " << CpuKernelsName(variants[v]) << " vs "
              << CpuKernelsName(variants[0]);
        }
      }
    }
  }
}

TEST(CpuVariantsTest, DenseMatMulAgreesToFloatRounding) {
  const std::vector<CpuKernels> variants = Variants();
  uint32_t seed = 1000;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    const int64_t k = 777, n = 45;
    const testing::TestWeights tw = testing::MakeDense(n, k, t, ++seed);
    for (int64_t m : {1, 9}) {
      const std::vector<float> x = testing::RandomFloats(m * k, ++seed);
      const std::vector<float> want = MatMulOn(variants[0], tw, x, m);
      std::vector<double> ref(want.begin(), want.end()), tol(want.size());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < n; ++r) {
          double mag = 0;
          for (int64_t c = 0; c < k; ++c) mag += std::fabs(x[i * k + c] * tw.value[r * k + c]);
          // Both sides within (K/8 + 32) eps of the exact sum (matmul_test).
          tol[i * n + r] = 2 * (k / 8.0 + 32) * kEps * mag + 1e-30;
        }
      }
      for (size_t v = 1; v < variants.size(); ++v) {
        EXPECT_TRUE(testing::AllWithin(ref, MatMulOn(variants[v], tw, x, m), tol, n))
            << tw.w.Describe() << " m=" << m << ": " << CpuKernelsName(variants[v]);
      }
    }
  }
}

TEST(CpuVariantsTest, RmsNormAndGeluAgreeToFloatRounding) {
  const std::vector<CpuKernels> variants = Variants();
  const int64_t rows = 5, d = 1000;
  const std::vector<float> x = testing::RandomFloats(rows * d, 77, -4.0f, 4.0f);
  const std::vector<float> u = testing::RandomFloats(rows * d, 78, -2.0f, 2.0f);
  const std::vector<float> w = testing::RandomFloats(d, 79, -2.0f, 2.0f);
  auto run = [&](CpuKernels k) {
    std::unique_ptr<Backend> b = MakeCpuBackend(k);
    DeviceTensor dx = testing::UploadF32(*b, x, rows, d);
    DeviceTensor du = testing::UploadF32(*b, u, rows, d);
    const DeviceBuffer dw = testing::UploadArray(*b, w);
    b->ops().RmsNorm(dx.view, dw.as<float>(), 1e-6f, dx.view);
    b->ops().GeluMul(dx.view, du.view, dx.view);
    return testing::DownloadF32(*b, dx.view);
  };
  const std::vector<float> want = run(variants[0]);
  std::vector<double> ref(want.begin(), want.end()), tol(want.size());
  // The norm's sum of squares (d/8 + 8 eps, halved), its roundings and the
  // GELU's polynomial (a few ulp) on each side, scaled by the product's
  // sensitivity (|gelu'| <= 1.13, |u| <= 2, |x w| <= 8 after the norm).
  for (size_t i = 0; i < want.size(); ++i)
    tol[i] = 2 * ((d / 8.0 + 8) + 16) * kEps * (std::fabs(want[i]) + 2 * 1.13 * 8);
  for (size_t v = 1; v < variants.size(); ++v) {
    EXPECT_TRUE(testing::AllWithin(ref, run(variants[v]), tol, d)) << CpuKernelsName(variants[v]);
  }
}

}  // namespace
}  // namespace g4
