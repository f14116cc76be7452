#include "core/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/status.h"

namespace g4 {
namespace {

TEST(Float16, Bf16RoundsToNearestEven) {
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f)), 1.0f);
  // 1 + 2^-8 lies exactly between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1.0).
  EXPECT_EQ(RoundBf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  EXPECT_EQ(RoundBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(RoundBf16(std::sqrt(2560.0f)), 50.5f);  // E4B embed scale from the spec
  EXPECT_EQ(RoundBf16(std::sqrt(1536.0f)), 39.25f);
  EXPECT_TRUE(std::isnan(RoundBf16(NAN)));
}

TEST(Float16, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Float16, F16RoundingMatchesNearest) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-70000.f, 70000.f);
  for (int i = 0; i < 20000; ++i) {
    const float f = d(rng) * (i % 2 ? 1e-4f : 1.0f);
    const float r = F16ToF32(F32ToF16(f));
    if (std::fabs(f) > 65504.f) continue;
    // |f - r| must not exceed half an f16 ulp at f's magnitude.
    int e;
    std::frexp(std::fabs(f), &e);
    const float ulp = std::ldexp(1.0f, std::max(e - 11, -24));
    EXPECT_LE(std::fabs(f - r), ulp / 2 * 1.0001f) << f;
  }
}

TEST(Float16, F8E4M3) {
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(0xb8), -1.0f);
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(DType::kBool); ++i) {
    auto t = static_cast<DType>(i);
    auto parsed = ParseDType(DTypeName(t));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(ParseDType("F128").has_value());
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
}

TEST(Status, ContextAndOr) {
  Status s = Corrupt("bad bytes").WithContext("model.safetensors");
  EXPECT_EQ(s.ToString(), "corrupt: model.safetensors: bad bytes");
  StatusOr<int> v = 3;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
  StatusOr<int> e = NotFound("x");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace g4
