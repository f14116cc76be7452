#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>

namespace g4 {
namespace {

TEST(Rope, ProportionalFullLayerTable) {
  // Spec section 5: 64 non-zero inverse frequencies for D=512, theta=1e6,
  // partial 0.25, exponent over the full head dim; 192 zero slots.
  RopeParams p;
  p.type = RopeParams::Type::kProportional;
  p.theta = 1e6;
  p.partial_rotary_factor = 0.25;
  auto inv = RopeInverseFrequencies(p, 512);
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->size(), 256u);
  EXPECT_FLOAT_EQ((*inv)[0], 1.0f);
  EXPECT_NEAR((*inv)[1], 0.947464, 1e-6);
  EXPECT_NEAR((*inv)[2], 0.897687, 1e-6);
  EXPECT_NEAR((*inv)[63], 0.0333762, 1e-7);
  for (int i = 64; i < 256; ++i) EXPECT_EQ((*inv)[i], 0.0f) << i;
}

TEST(Rope, DefaultSlidingTableAgreesWithDoublePrecision) {
  RopeParams p;
  p.theta = 10000.0;
  auto inv = RopeInverseFrequencies(p, 256);
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->size(), 128u);
  for (int i = 0; i < 128; ++i) {
    const double want = std::pow(10000.0, -2.0 * i / 256.0);
    EXPECT_NEAR((*inv)[i], want, 2e-7 * std::max(1.0, want)) << i;
  }
}

TEST(Rope, FactorDividesEveryFrequency) {
  RopeParams p;
  p.type = RopeParams::Type::kProportional;
  p.theta = 1e6;
  p.partial_rotary_factor = 0.25;
  auto base = RopeInverseFrequencies(p, 512);
  p.factor = 8.0;
  auto scaled = RopeInverseFrequencies(p, 512);
  ASSERT_TRUE(base.ok() && scaled.ok());
  for (int i = 0; i < 256; ++i) EXPECT_FLOAT_EQ((*scaled)[i], (*base)[i] / 8.0f);
}

TEST(Rope, RejectsOddHeadDim) {
  RopeParams p;
  EXPECT_FALSE(RopeInverseFrequencies(p, 33).ok());
}

}  // namespace
}  // namespace g4
