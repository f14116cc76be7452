// KV records (backend/kv_record.h): codec signatures, the plane layout each
// codec gets for a geometry, the geometry checks, and round trips of the host
// reference encoder/decoder on fresh random rows. Expected layouts are
// written from the format description in kv_record.h, and error bounds come
// from the codecs' documented rounding rules, never from the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/kv_affine_codec.h"
#include "backend/kv_formats.h"
#include "backend/kv_record.h"
#include "backend/kv_turbo_codec.h"
#include "backend/lloyd_max.h"
#include "core/float16.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::GaussianFloats;
KvRecordFormat MustMake(const KvCodecSpec& spec, int heads, int head_dim) {
  StatusOr<KvRecordFormat> f = KvRecordFormat::Make(spec, heads, head_dim);
  EXPECT_TRUE(f.ok()) << spec.signature() << " " << heads << "x" << head_dim << ": " << f.status().ToString();
  return f.ok() ? *f : KvRecordFormat{};
}

uint16_t Read16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

TEST(KvCodecSpec, SignaturesRoundTrip) {
  const KvCodecSpec specs[] = {
      KvCodecSpec::Plain(),           KvCodecSpec::Plain(DType::kBF16), KvCodecSpec::Plain(DType::kF16),
      KvCodecSpec::Affine(4, 32),     KvCodecSpec::Affine(8, 64),       KvCodecSpec::Affine(4, 128),
      KvCodecSpec::Turbo(8, 3),       KvCodecSpec::Turbo(2, 5),         KvCodecSpec::Turbo(5, 8)};
  const char* names[] = {"kv:plain",       "kv:plain:bf16",  "kv:plain:f16",
                         "kv:affine:4:32", "kv:affine:8:64", "kv:affine:4:128",
                         "kv:turbo:k8v3",  "kv:turbo:k2v5",  "kv:turbo:k5v8"};
  for (size_t i = 0; i < std::size(specs); ++i) {
    EXPECT_EQ(specs[i].signature(), names[i]);
    StatusOr<KvCodecSpec> back = KvCodecSpec::FromSignature(names[i]);
    ASSERT_TRUE(back.ok()) << names[i] << ": " << back.status().ToString();
    EXPECT_EQ(*back, specs[i]) << names[i];
  }
  for (const char* bad : {"", "kv:plain:f64", "kv:plain:", "plain", "kv:affine:4", "kv:affine:x:64",
                          "kv:affine:-4:64", "kv:affine:4:64:1", "kv:turbo:k8", "kv:turbo:k8v", "kv:turbo:8v3",
                          "kv:turbo:k8v3x", "kv:dense"}) {
    StatusOr<KvCodecSpec> s = KvCodecSpec::FromSignature(bad);
    ASSERT_FALSE(s.ok()) << "'" << bad << "' parsed";
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << s.status().message();
  }
}

TEST(KvRecordFormat, PlainTakesAnyHeadDim) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    const int64_t elem = t == DType::kF32 ? 4 : 2;
    for (int head_dim : {1, 7, 40, 72, 100, 128, 256, 512, 1000}) {
      for (int heads : {1, 3, 8}) {
        const KvRecordFormat f = MustMake(KvCodecSpec::Plain(t), heads, head_dim);
        const int64_t w = static_cast<int64_t>(heads) * head_dim;
        EXPECT_EQ(f.width(), w);
        EXPECT_EQ(f.k_codes, 0);
        EXPECT_EQ(f.v_codes, w * elem);
        EXPECT_EQ(f.record_bytes, 2 * w * elem);
        EXPECT_FALSE(f.rotates_values());
      }
    }
  }
  EXPECT_FALSE(KvRecordFormat::Make(KvCodecSpec::Plain(), 1, 0).ok());
  EXPECT_FALSE(KvRecordFormat::Make(KvCodecSpec::Plain(), 0, 64).ok());
  EXPECT_FALSE(KvRecordFormat::Make(KvCodecSpec::Plain(DType::kI32), 1, 64).ok());
}

TEST(KvRecordFormat, AffinePlanes) {
  for (int bits : {4, 8}) {
    for (int group : {32, 64, 128}) {
      for (int head_dim : {128, 256, 384}) {
        const int heads = 3;
        const KvRecordFormat f = MustMake(KvCodecSpec::Affine(bits, group), heads, head_dim);
        const int64_t w = heads * head_dim, codes = w * bits / 8, groups = w / group;
        EXPECT_EQ(f.spec.group, group);
        EXPECT_EQ(f.k_codes, 0);
        EXPECT_EQ(f.k_scales, codes);
        EXPECT_EQ(f.k_biases, codes + 2 * groups);
        EXPECT_EQ(f.v_codes, codes + 4 * groups);
        EXPECT_EQ(f.v_scales, 2 * codes + 4 * groups);
        EXPECT_EQ(f.v_biases, 2 * codes + 6 * groups);
        EXPECT_EQ(f.record_bytes, 2 * codes + 8 * groups);
      }
    }
  }
}

TEST(KvRecordFormat, AffineGroupNarrowsOnlyToAValidGroup) {
  // A group wider than the head becomes the head, when the head is 32/64/128.
  for (int head_dim : {32, 64}) {
    const KvRecordFormat f = MustMake(KvCodecSpec::Affine(4, 128), 2, head_dim);
    EXPECT_EQ(f.spec.group, head_dim);
    EXPECT_EQ(f.signature(), "kv:affine:4:" + std::to_string(head_dim));
  }
  EXPECT_EQ(MustMake(KvCodecSpec::Affine(8, 64), 1, 32).spec.group, 32);
  // Otherwise a clear error naming the codec, the group and head_dim.
  const struct { int group, head_dim; } kBad[] = {{64, 96}, {128, 40}, {32, 40}, {32, 100}, {128, 192}, {64, 72}};
  for (const auto& c : kBad) {
    StatusOr<KvRecordFormat> f = KvRecordFormat::Make(KvCodecSpec::Affine(4, c.group), 2, c.head_dim);
    ASSERT_FALSE(f.ok()) << c.group << " " << c.head_dim;
    EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
    const std::string& m = f.status().message();
    EXPECT_NE(m.find("kv:affine:4:" + std::to_string(c.group)), std::string::npos) << m;
    EXPECT_NE(m.find("group " + std::to_string(c.group)), std::string::npos) << m;
    EXPECT_NE(m.find("head_dim " + std::to_string(c.head_dim)), std::string::npos) << m;
  }
  for (const KvCodecSpec& bad : {KvCodecSpec::Affine(2, 64), KvCodecSpec::Affine(3, 64), KvCodecSpec::Affine(4, 16),
                                 KvCodecSpec::Affine(4, 256)}) {
    StatusOr<KvRecordFormat> f = KvRecordFormat::Make(bad, 1, 256);
    ASSERT_FALSE(f.ok()) << bad.signature();
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(KvRecordFormat, TurboPlanesAndGeometry) {
  for (int kb : {2, 4, 5, 8}) {
    for (int vb : {2, 3, 4, 5, 8}) {
      for (int head_dim : {32, 64, 256, 512}) {
        const int heads = 2;
        const KvRecordFormat f = MustMake(KvCodecSpec::Turbo(kb, vb), heads, head_dim);
        const int64_t w = heads * head_dim, groups = w / 32;
        EXPECT_TRUE(f.rotates_values());
        EXPECT_EQ(f.k_codes, 0);
        EXPECT_EQ(f.k_scales, w * kb / 8);
        EXPECT_EQ(f.k_biases, w * kb / 8 + 2 * groups);
        EXPECT_EQ(f.v_codes, w * kb / 8 + 4 * groups);
        EXPECT_EQ(f.v_scales, w * kb / 8 + 4 * groups + w * vb / 8);
        EXPECT_EQ(f.record_bytes, w * (kb + vb) / 8 + 6 * groups);
      }
    }
  }
  // TurboQuant (as mlx-bun implements it): k8v3 at d=128 is 200 bytes per token per head.
  EXPECT_EQ(MustMake(KvCodecSpec::Turbo(8, 3), 1, 128).record_bytes, 200);
  for (int head_dim : {16, 40, 96, 100, 1024}) {
    StatusOr<KvRecordFormat> f = KvRecordFormat::Make(KvCodecSpec::Turbo(8, 3), 1, head_dim);
    ASSERT_FALSE(f.ok()) << head_dim;
    EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(f.status().message().find(std::to_string(head_dim)), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("kv:turbo:k8v3"), std::string::npos) << f.status().message();
  }
  EXPECT_FALSE(KvRecordFormat::Make(KvCodecSpec::Turbo(3, 3), 1, 128).ok());
  EXPECT_FALSE(KvRecordFormat::Make(KvCodecSpec::Turbo(8, 6), 1, 128).ok());
}

// Encoding n rows at once equals encoding them one at a time, and every row
// decodes back from its own record only.
void ExpectRecordsIndependent(const KvRecordFormat& f, uint32_t seed) {
  const int64_t n = 5, w = f.width();
  const std::vector<float> k = GaussianFloats(n * w, seed), v = GaussianFloats(n * w, seed + 1, 2.0f);
  std::vector<uint8_t> all(n * f.record_bytes), one(f.record_bytes);
  EncodeKvRecords(f, k.data(), v.data(), n, all.data());
  for (int64_t t = 0; t < n; ++t) {
    EncodeKvRecords(f, k.data() + t * w, v.data() + t * w, 1, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * f.record_bytes, f.record_bytes))
        << f.signature() << " record " << t;
  }
}

TEST(KvRecords, PlainRoundTripsAtItsPrecision) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int head_dim : {1, 40, 72, 100, 256}) {
      const KvRecordFormat f = MustMake(KvCodecSpec::Plain(t), 2, head_dim);
      const int64_t n = 7, w = f.width();
      // Spread magnitudes so bf16/f16 rounding sees many exponents.
      std::vector<float> k = GaussianFloats(n * w, head_dim + 10, 3.0f), v = GaussianFloats(n * w, head_dim + 20, 0.01f);
      std::vector<uint8_t> rec(n * f.record_bytes);
      EncodeKvRecords(f, k.data(), v.data(), n, rec.data());
      std::vector<float> k2(n * w), v2(n * w);
      DecodeKvRecords(f, rec.data(), n, k2.data(), v2.data());
      // Half an ulp: 2^-8 relative for bf16 (8 significant bits), 2^-11 for
      // f16 (11 significant bits).
      const float rel = t == DType::kF32 ? 0.0f : t == DType::kBF16 ? 0x1p-8f : 0x1p-11f;
      for (int64_t i = 0; i < n * w; ++i) {
        // f16 subnormals (below 2^-14) are spaced 2^-24 apart.
        const float sub = t == DType::kF16 ? 0x1p-25f : 0.0f;
        ASSERT_LE(std::fabs(k2[i] - k[i]), rel * std::fabs(k[i]) + sub) << f.signature() << " k " << i;
        ASSERT_LE(std::fabs(v2[i] - v[i]), rel * std::fabs(v[i]) + sub)
            << f.signature() << " v " << i;
      }
      // The stored bits are the K row then the V row, element by element.
      for (int64_t i = 0; i < w; ++i) {
        const int64_t e = 3 * w + i;  // record 3
        const uint8_t* r = rec.data() + 3 * f.record_bytes;
        if (t == DType::kF32) {
          float x;
          std::memcpy(&x, r + f.v_codes + 4 * i, 4);
          ASSERT_EQ(x, v[e]);
        } else {
          const uint16_t h = Read16(r + f.k_codes + 2 * i);
          ASSERT_EQ(t == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h), k2[e]);
        }
      }
      ExpectRecordsIndependent(f, 77);
    }
  }
  // Round to nearest even at a tie: 1 + 2^-8 lies halfway between the bf16
  // neighbours 1 and 1 + 2^-7 and must go to 1 (even mantissa).
  const KvRecordFormat f = MustMake(KvCodecSpec::Plain(DType::kBF16), 1, 2);
  const float k[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, v[2] = {-(1.0f + 0x1p-8f), 0.0f};
  std::vector<uint8_t> rec(f.record_bytes);
  EncodeKvRecords(f, k, v, 1, rec.data());
  float k2[2], v2[2];
  DecodeKvRecords(f, rec.data(), 1, k2, v2);
  EXPECT_EQ(k2[0], 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(k2[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(v2[0], -1.0f);
}

TEST(KvRecords, AffineWithinHalfAStepPerElement) {
  uint32_t seed = 500;
  for (int bits : {4, 8}) {
    for (int group : {32, 64, 128}) {
      const KvRecordFormat f = MustMake(KvCodecSpec::Affine(bits, group), 2, 128);
      const int64_t n = 4, w = f.width(), groups = w / group;
      const std::vector<float> k = GaussianFloats(n * w, ++seed, 1.0f, 0.5f), v = GaussianFloats(n * w, ++seed, 4.0f, -3.0f);
      std::vector<uint8_t> rec(n * f.record_bytes);
      EncodeKvRecords(f, k.data(), v.data(), n, rec.data());
      std::vector<float> k2(n * w), v2(n * w);
      DecodeKvRecords(f, rec.data(), n, k2.data(), v2.data());
      for (int64_t t = 0; t < n; ++t) {
        const uint8_t* r = rec.data() + t * f.record_bytes;
        for (int plane = 0; plane < 2; ++plane) {
          const std::vector<float>& x = plane ? v : k;
          const std::vector<float>& y = plane ? v2 : k2;
          const int64_t scales = plane ? f.v_scales : f.k_scales, biases = plane ? f.v_biases : f.k_biases;
          const int64_t codes = plane ? f.v_codes : f.k_codes;
          for (int64_t g = 0; g < groups; ++g) {
            const float s = F16ToF32(Read16(r + scales + 2 * g)), b = F16ToF32(Read16(r + biases + 2 * g));
            const auto first = x.begin() + t * w + g * group;
            EXPECT_LE(b, *std::min_element(first, first + group));
            for (int i = 0; i < group; ++i) {
              const int64_t e = t * w + g * group + i;
              ASSERT_LE(std::fabs(x[e] - y[e]), 0.5f * s * (1 + 1e-5f) + 1e-6f * std::fabs(x[e]))
                  << f.signature() << " plane " << plane << " element " << e;
              // The code read independently from the LSB-first stream.
              const int64_t bit = (g * group + i) * bits;
              uint32_t q = 0;
              for (int j = 0; j < bits; ++j) q |= ((r[codes + (bit + j) / 8] >> ((bit + j) % 8)) & 1u) << j;
              ASSERT_EQ(y[e], std::fma(s, static_cast<float>(q), b)) << f.signature() << " element " << e;
            }
          }
        }
      }
      ExpectRecordsIndependent(f, seed);
    }
  }
}

TEST(KvRecords, TurboKeysWithinAStepAndValuesNearLloydMax) {
  uint32_t seed = 900;
  for (int kb : {2, 4, 5, 8}) {
    for (int vb : {2, 3, 4, 5, 8}) {
      const KvRecordFormat f = MustMake(KvCodecSpec::Turbo(kb, vb), 2, 64);
      const int64_t n = 64, w = f.width();
      const std::vector<float> k = GaussianFloats(n * w, ++seed, 1.0f, 0.3f), v = GaussianFloats(n * w, ++seed);
      std::vector<uint8_t> rec(n * f.record_bytes);
      EncodeKvRecords(f, k.data(), v.data(), n, rec.data());
      std::vector<float> k2(n * w), v2(n * w), v_rot(n * w), k3(n * w);
      DecodeKvRecords(f, rec.data(), n, k2.data(), v2.data());
      DecodeKvRecords(f, rec.data(), n, k3.data(), v_rot.data(), /*rotated_values=*/true);
      EXPECT_EQ(k2, k3);
      double err = 0, var = 0;
      for (int64_t t = 0; t < n; ++t) {
        const uint8_t* r = rec.data() + t * f.record_bytes;
        for (int64_t g = 0; g < w / 32; ++g) {
          const float s = F16ToF32(Read16(r + f.k_scales + 2 * g));
          EXPECT_EQ(F16ToF32(Read16(r + f.k_biases + 2 * g)), std::nearbyint(F16ToF32(Read16(r + f.k_biases + 2 * g))));
          for (int i = 0; i < 32; ++i) {
            const int64_t e = t * w + g * 32 + i;
            ASSERT_LE(std::fabs(k[e] - k2[e]), s * (1 + 1e-4f)) << f.signature() << " key element " << e;
          }
        }
        // Rotated values are the forward rotation of the decoded values.
        for (int h = 0; h < f.num_kv_heads; ++h) {
          std::vector<float> y(v2.begin() + t * w + h * 64, v2.begin() + t * w + (h + 1) * 64);
          kvfmt::RotateForward(y.data(), 64, TurboValueSigns(64));
          for (int i = 0; i < 64; ++i) ASSERT_NEAR(y[i], v_rot[t * w + h * 64 + i], 1e-5f * (1 + std::fabs(y[i])));
        }
      }
      for (int64_t i = 0; i < n * w; ++i) {
        err += (v[i] - v2[i]) * (v[i] - v2[i]);
        var += v[i] * v[i];
      }
      // Lloyd-Max distortion of N(0,1) at vb bits, with slack for the fp16
      // RMS and the finite sample.
      EXPECT_LE(err / var, 1.3 * FindLloydMaxCodebook(vb)->distortion) << f.signature();
      ExpectRecordsIndependent(f, seed);
    }
  }
  EXPECT_EQ(TurboValueCentroids(3), FindLloydMaxCodebook(3)->centroids);
  for (int d : {32, 64, 128, 256, 512}) {
    const float* s = TurboValueSigns(d);
    for (int i = 0; i < d; ++i) ASSERT_TRUE(s[i] == 1.0f || s[i] == -1.0f);
  }
}

}  // namespace
}  // namespace g4
