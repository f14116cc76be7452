// Codec numerics on fresh random data: bit packing, affine groups, the
// TurboQuant key/value encoders, the value rotation and the Lloyd-Max tables.
// References are independent of the code under test: bit-by-bit packing,
// published Lloyd-Max constants, and numerical integration of N(0,1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/kv_affine_codec.h"
#include "backend/kv_formats.h"
#include "backend/kv_turbo_codec.h"
#include "backend/lloyd_max.h"
#include "core/float16.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::GaussianFloats;
TEST(BitPacking, RoundTripsAndIsLsbFirstAtEveryWidth) {
  std::mt19937 rng(7);
  for (int bits = 1; bits <= 8; ++bits) {
    for (int64_t n : {8, 32, 64, 200, 512}) {
      std::vector<uint8_t> v(n);
      for (auto& x : v) x = static_cast<uint8_t>(rng() & ((1u << bits) - 1));
      std::vector<uint8_t> packed(kvfmt::PackedBytes(n, bits));
      kvfmt::PackBits(v.data(), n, bits, packed.data());
      // Reference: bit j of value i is stream bit i*bits + j, stream bit k is
      // bit (k % 8) of byte k / 8.
      std::vector<uint8_t> want(packed.size(), 0);
      for (int64_t i = 0; i < n; ++i)
        for (int j = 0; j < bits; ++j)
          if ((v[i] >> j) & 1) want[(i * bits + j) / 8] |= static_cast<uint8_t>(1u << ((i * bits + j) % 8));
      ASSERT_EQ(packed, want) << "bits " << bits << " n " << n;
      std::vector<uint8_t> back(n);
      kvfmt::UnpackBits(packed.data(), n, bits, back.data());
      ASSERT_EQ(back, v) << "bits " << bits << " n " << n;
      if (n % 32 == 0) {
        std::vector<float> f(32);
        for (int64_t g = 0; g < n / 32; ++g) {
          kvfmt::UnpackGroup32(packed.data() + g * 4 * bits, bits, f.data());
          for (int i = 0; i < 32; ++i) ASSERT_EQ(f[i], v[g * 32 + i]) << "bits " << bits;
        }
      }
    }
  }
}

TEST(AffineCodec, ErrorWithinHalfAStepForEveryElement) {
  uint32_t seed = 100;
  for (int bits : {4, 8}) {
    for (int group : {32, 64, 128}) {
      for (float mean : {0.0f, 3.0f, -20.0f}) {
        const AffineRowFormat f{bits, group, 512};
        const std::vector<float> x = GaussianFloats(f.width, ++seed, 2.0f, mean);
        std::vector<uint8_t> codes(f.code_bytes());
        std::vector<uint16_t> scales(f.groups()), biases(f.groups());
        AffineQuantizeRow(x.data(), f, codes.data(), scales.data(), biases.data());
        std::vector<float> y(f.width);
        AffineDequantizeRow(codes.data(), scales.data(), biases.data(), f, y.data());
        const int levels = (1 << bits) - 1;
        for (int64_t g = 0; g < f.groups(); ++g) {
          const float lo = *std::min_element(x.begin() + g * group, x.begin() + (g + 1) * group);
          const float hi = *std::max_element(x.begin() + g * group, x.begin() + (g + 1) * group);
          const float step = F16ToF32(scales[g]);
          // The grid is the ideal one up to fp16 rounding: the bias is the
          // group minimum rounded down, the step (max - bias) / levels rounded up.
          const float bias = F16ToF32(biases[g]);
          EXPECT_LE(bias, lo);
          EXPECT_LE(lo - bias, std::ldexp(std::fabs(lo), -10) + 1e-7f);
          EXPECT_LE(step, (hi - bias) / levels * (1 + 1e-3f)) << bits << "/" << group;
          EXPECT_GE(step, (hi - bias) / levels);
          for (int i = 0; i < group; ++i) {
            const int64_t e = g * group + i;
            ASSERT_LE(std::fabs(x[e] - y[e]), 0.5f * step * (1 + 1e-5f) + 1e-6f * std::fabs(x[e]))
                << "bits " << bits << " group " << group << " element " << e;
          }
        }
      }
    }
  }
}

TEST(AffineCodec, ConstantGroupsAreExactWhenRepresentable) {
  const AffineRowFormat f{4, 32, 64};
  std::vector<float> x(64, 0.75f);
  std::fill(x.begin() + 32, x.end(), -2.0f);
  std::vector<uint8_t> codes(f.code_bytes());
  std::vector<uint16_t> scales(2), biases(2);
  AffineQuantizeRow(x.data(), f, codes.data(), scales.data(), biases.data());
  std::vector<float> y(64);
  AffineDequantizeRow(codes.data(), scales.data(), biases.data(), f, y.data());
  EXPECT_EQ(x, y);
}

TEST(TurboKeys, ErrorWithinHalfAStep) {
  uint32_t seed = 300;
  for (int bits : {2, 4, 5, 8}) {
    for (float mean : {0.0f, 1.5f}) {
      const TurboRowFormat f{bits, 3, 128, 2};
      ASSERT_TRUE(ValidateTurboFormat(f).ok());
      const std::vector<float> x = GaussianFloats(f.width(), ++seed, 1.0f, mean);
      std::vector<uint8_t> idx(f.key_index_bytes());
      std::vector<uint16_t> scales(f.groups()), zeros(f.groups());
      TurboEncodeKeysRow(x.data(), f, idx.data(), scales.data(), zeros.data());
      std::vector<float> y(f.width());
      TurboDecodeKeysRow(idx.data(), scales.data(), zeros.data(), f, y.data());
      const float levels = bits == 8 ? 254.0f : static_cast<float>((1 << bits) - 1);
      for (int64_t g = 0; g < f.groups(); ++g) {
        const float lo = *std::min_element(x.begin() + g * 32, x.begin() + (g + 1) * 32);
        const float hi = *std::max_element(x.begin() + g * 32, x.begin() + (g + 1) * 32);
        const float s = F16ToF32(scales[g]);
        EXPECT_NEAR(s, (hi - lo) / levels, (hi - lo) / levels * 1e-3f);
        EXPECT_EQ(F16ToF32(zeros[g]), std::nearbyint(F16ToF32(zeros[g])));  // integer zero point
        for (int i = 0; i < 32; ++i) {
          const int64_t e = g * 32 + i;
          // Rounding the zero point can push an extreme element past the grid end by half a step.
          ASSERT_LE(std::fabs(x[e] - y[e]), s * (1 + 1e-4f)) << "bits " << bits << " element " << e;
        }
      }
    }
  }
}

TEST(TurboRotation, IsExactlyOrthogonalAndInvertible) {
  for (int d : {32, 64, 128, 256, 512}) {
    const float* signs = TurboValueSigns(d);
    int plus = 0;
    for (int i = 0; i < d; ++i) {
      ASSERT_TRUE(signs[i] == 1.0f || signs[i] == -1.0f);
      plus += signs[i] > 0;
    }
    EXPECT_GT(plus, d / 4);  // a random sign vector, not a constant one
    EXPECT_LT(plus, 3 * d / 4);
    // R's columns: the rotation of each unit vector.
    std::vector<double> r(static_cast<size_t>(d) * d);
    std::vector<float> e(d);
    for (int j = 0; j < d; ++j) {
      std::fill(e.begin(), e.end(), 0.0f);
      e[j] = 1.0f;
      kvfmt::RotateForward(e.data(), d, signs);
      for (int i = 0; i < d; ++i) r[static_cast<size_t>(i) * d + j] = e[i];
    }
    double worst = 0;
    for (int a = 0; a < d; ++a)
      for (int b = 0; b < d; ++b) {
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += r[static_cast<size_t>(a) * d + i] * r[static_cast<size_t>(b) * d + i];
        worst = std::max(worst, std::fabs(dot - (a == b ? 1.0 : 0.0)));
      }
    EXPECT_LT(worst, 1e-6) << "R R^T != I for d=" << d;
    const std::vector<float> x = GaussianFloats(d, 900 + d);
    std::vector<float> y = x;
    kvfmt::RotateForward(y.data(), d, signs);
    double norm_x = 0, norm_y = 0;
    for (int i = 0; i < d; ++i) norm_x += x[i] * x[i], norm_y += y[i] * y[i];
    EXPECT_NEAR(norm_x, norm_y, 1e-5 * norm_x);
    kvfmt::RotateInverse(y.data(), d, signs);
    for (int i = 0; i < d; ++i) ASSERT_NEAR(y[i], x[i], 2e-6f * (1 + std::fabs(x[i]))) << "d=" << d;
  }
}

// Relative MSE of the value encoder on unit Gaussian data, against the
// Lloyd-Max distortion of N(0,1) (Max 1960 and later tables).
TEST(TurboValues, DistortionWithinFifteenPercentOfLloydMax) {
  const struct { int bits; double lloyd_max; } kCases[] = {
      {2, 0.1175}, {3, 0.03454}, {4, 0.009497},
      // No classic table for 5 and 8 bits: the Panter-Dite high-resolution
      // value sqrt(3) pi / 2 * 4^-b bounds Lloyd-Max from above.
      {5, 2.7207 / 1024}, {8, 2.7207 / 65536}};
  for (const auto& c : kCases) {
    const TurboRowFormat f{8, c.bits, 128, 4};
    double err = 0, var = 0;
    uint32_t seed = 1000 + c.bits;
    for (int row = 0; row < 400; ++row) {
      const std::vector<float> x = GaussianFloats(f.width(), ++seed);
      std::vector<uint8_t> packed(f.value_index_bytes());
      std::vector<uint16_t> scales(f.groups());
      TurboEncodeValuesRow(x.data(), f, packed.data(), scales.data());
      std::vector<float> y(f.width());
      TurboDecodeValuesRow(packed.data(), scales.data(), f, /*rotated=*/false, y.data());
      for (int64_t i = 0; i < f.width(); ++i) {
        err += (x[i] - y[i]) * (x[i] - y[i]);
        var += x[i] * x[i];
      }
    }
    const double rel = err / var;
    std::printf("[ turbo v%d ] MSE/variance %.6g (Lloyd-Max %.6g, ratio %.3f)\n", c.bits, rel, c.lloyd_max,
                rel / c.lloyd_max);
    EXPECT_LE(rel, 1.15 * c.lloyd_max) << "value bits " << c.bits;
    EXPECT_GE(rel, 0.5 * c.lloyd_max) << "value bits " << c.bits;  // sanity: not lossless by accident
  }
}

TEST(TurboValues, RotatedDomainDecodeCommutesWithWeightedSums) {
  const TurboRowFormat f{8, 3, 64, 2};
  const int rows = 9;
  std::vector<float> weights = GaussianFloats(rows, 5);
  std::vector<double> eager(f.width(), 0.0);
  std::vector<float> deferred(f.width(), 0.0f);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> x = GaussianFloats(f.width(), 50 + r);
    std::vector<uint8_t> packed(f.value_index_bytes());
    std::vector<uint16_t> scales(f.groups());
    TurboEncodeValuesRow(x.data(), f, packed.data(), scales.data());
    std::vector<float> plain(f.width()), rotated(f.width());
    TurboDecodeValuesRow(packed.data(), scales.data(), f, false, plain.data());
    TurboDecodeValuesRow(packed.data(), scales.data(), f, true, rotated.data());
    for (int64_t i = 0; i < f.width(); ++i) {
      eager[i] += weights[r] * plain[i];
      deferred[i] += weights[r] * rotated[i];
    }
  }
  for (int h = 0; h < f.num_heads; ++h)
    kvfmt::RotateInverse(deferred.data() + h * f.head_dim, f.head_dim, TurboValueSigns(f.head_dim));
  for (int64_t i = 0; i < f.width(); ++i) EXPECT_NEAR(deferred[i], eager[i], 1e-5 * (1 + std::fabs(eager[i])));
}

TEST(TurboFormat, SizesAndValidation) {
  // TurboQuant (as mlx-bun implements it): k8v3 at d=128 is 200 bytes per token per head.
  EXPECT_EQ((TurboRowFormat{8, 3, 128, 1}.bytes()), 200);
  EXPECT_EQ((TurboRowFormat{4, 3, 128, 1}.bytes()), 64 + 48 + 24);
  EXPECT_FALSE(ValidateTurboFormat({3, 3, 128, 1}).ok());
  EXPECT_FALSE(ValidateTurboFormat({8, 6, 128, 1}).ok());
  EXPECT_FALSE(ValidateTurboFormat({8, 3, 96, 1}).ok());
  EXPECT_FALSE(ValidateTurboFormat({8, 3, 1024, 1}).ok());
}

double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

TEST(LloydMax, TablesMatchPublishedValuesAndTheCentroidCondition) {
  // TurboQuant's 3-bit Lloyd-Max centroids and boundaries (backend/kv_turbo_codec.h).
  const LloydMaxCodebook* b3 = FindLloydMaxCodebook(3);
  ASSERT_NE(b3, nullptr);
  const double c3[] = {0.24509, 0.75601, 1.34391, 2.15195};
  const double t3[] = {0.50055, 1.04996, 1.74793};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(b3->centroids[4 + i], c3[i], 2e-5);
    EXPECT_NEAR(b3->centroids[3 - i], -c3[i], 2e-5);
  }
  EXPECT_NEAR(b3->boundaries[3], 0.0, 1e-7);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(b3->boundaries[4 + i], t3[i], 2e-5);
  EXPECT_EQ(FindLloydMaxCodebook(6), nullptr);
  // Every table is a fixed point of Lloyd's algorithm: each centroid is the
  // conditional mean of N(0,1) on its cell, here by numerical integration.
  for (int bits : {2, 3, 4, 5, 8}) {
    const LloydMaxCodebook* book = FindLloydMaxCodebook(bits);
    ASSERT_NE(book, nullptr);
    double distortion = 0;
    for (int i = 0; i < book->levels(); ++i) {
      const double a = i == 0 ? -12.0 : book->boundaries[i - 1];
      const double b = i == book->levels() - 1 ? 12.0 : book->boundaries[i];
      if (i > 0) {
        EXPECT_NEAR(book->boundaries[i - 1], 0.5 * (book->centroids[i - 1] + book->centroids[i]), 1e-6);
      }
      const int steps = 2000;  // Simpson
      double mass = 0, first = 0, second = 0;
      for (int s = 0; s <= steps; ++s) {
        const double x = a + (b - a) * s / steps;
        const double w = (s == 0 || s == steps) ? 1 : (s % 2 ? 4 : 2);
        const double p = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI) * w * (b - a) / steps / 3;
        mass += p;
        first += x * p;
        second += (x - book->centroids[i]) * (x - book->centroids[i]) * p;
      }
      EXPECT_NEAR(mass, Phi(b) - Phi(a), 1e-9);
      EXPECT_NEAR(first / mass, book->centroids[i], 2e-6 * std::max(1.0, std::fabs(static_cast<double>(book->centroids[i]))))
          << bits << " bits, level " << i;
      distortion += second;
    }
    EXPECT_NEAR(distortion, book->distortion, 1e-6 * std::max(1.0, book->distortion * 1e3)) << bits << " bits";
  }
  EXPECT_NEAR(FindLloydMaxCodebook(2)->distortion, 0.1175, 1e-4);
  EXPECT_NEAR(FindLloydMaxCodebook(3)->distortion, 0.03454, 1e-4);
  EXPECT_NEAR(FindLloydMaxCodebook(4)->distortion, 0.009497, 1e-5);
}

TEST(LloydMax, BucketFindsTheNearestCentroid) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.5f);
  for (int bits : {2, 3, 4, 5, 8}) {
    const LloydMaxCodebook& book = *FindLloydMaxCodebook(bits);
    // A value on a boundary belongs to the cell below it.
    for (int j = 0; j + 1 < book.levels(); ++j) ASSERT_EQ(book.Bucket(book.boundaries[j]), j) << bits;
    for (int t = 0; t < 2000; ++t) {
      const float y = d(rng);
      const int k = book.Bucket(y);
      // The number of boundaries strictly below y, counted one by one.
      int below = 0;
      for (int j = 0; j + 1 < book.levels(); ++j) below += book.boundaries[j] < y;
      ASSERT_EQ(k, below) << bits << " bits, y " << y;
      for (int j = 0; j < book.levels(); ++j)
        ASSERT_LE(std::fabs(y - book.centroids[k]), std::fabs(y - book.centroids[j]) + 1e-6f) << bits;
    }
  }
}

}  // namespace
}  // namespace g4
