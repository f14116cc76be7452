// The --kv grammar: every codec, plain storage dtypes, delays, per-layer-type
// parts, signatures, and refusal of malformed specs.
#include <gtest/gtest.h>

#include <string>

#include "kv/kv_scheme.h"

namespace g4 {
namespace {

KvScheme MustParse(const std::string& spec) {
  auto p = KvScheme::Parse(spec);
  EXPECT_TRUE(p.ok()) << spec << ": " << p.status().ToString();
  return p.ok() ? *p : KvScheme{};
}

TEST(Scheme, ParsesTheKvGrammar) {
  EXPECT_EQ(MustParse("plain").signature(), "full=kv:plain,sliding=kv:plain");
  EXPECT_EQ(MustParse("affine:4").signature(), "full=kv:affine:4:64,sliding=kv:affine:4:64");
  const KvScheme delayed = MustParse("affine:4:32@100");
  EXPECT_EQ(delayed.full.delay, 100);
  EXPECT_TRUE(delayed.full.delayed());
  EXPECT_EQ(delayed.signature(), "full=kv:affine:4:32@100,sliding=kv:affine:4:32@100");
  // turbo applies to full layers only.
  EXPECT_EQ(MustParse("turbo:k4v3").signature(), "full=kv:turbo:k4v3,sliding=kv:plain");
  EXPECT_EQ(MustParse("turbo").full.codec, KvCodecSpec::Turbo(8, 3));
  EXPECT_EQ(MustParse("sliding=affine:8,full=turbo:k8v3@64").signature(),
            "full=kv:turbo:k8v3@64,sliding=kv:affine:8:64");
  EXPECT_EQ(MustParse("full=affine:8:128").sliding, LayerKvSpec{});  // unnamed type: plain
  EXPECT_TRUE(MustParse("plain").sliding_ring);
}

TEST(Scheme, PlainStorageDtypes) {
  EXPECT_EQ(MustParse("plain:f32").full.codec, KvCodecSpec::Plain(DType::kF32));
  EXPECT_EQ(MustParse("plain:f32").signature(), "full=kv:plain,sliding=kv:plain");
  const KvScheme bf16 = MustParse("plain:bf16");
  EXPECT_EQ(bf16.full.codec, KvCodecSpec::Plain(DType::kBF16));
  EXPECT_EQ(bf16.sliding.codec, KvCodecSpec::Plain(DType::kBF16));
  EXPECT_EQ(bf16.signature(), "full=kv:plain:bf16,sliding=kv:plain:bf16");
  EXPECT_EQ(MustParse("plain:f16").full.codec, KvCodecSpec::Plain(DType::kF16));
  EXPECT_EQ(MustParse("full=plain:f16,sliding=plain:bf16").signature(), "full=kv:plain:f16,sliding=kv:plain:bf16");
  // The delayed phase is f32: plain@N has nothing to convert, plain:bf16@N does.
  EXPECT_FALSE(MustParse("plain@64").full.delayed());
  EXPECT_EQ(MustParse("plain@64").signature(), "full=kv:plain,sliding=kv:plain");
  EXPECT_FALSE(MustParse("plain:f32@64").full.delayed());
  const KvScheme half_later = MustParse("plain:bf16@64");
  EXPECT_EQ(half_later.full.delay, 64);
  EXPECT_EQ(half_later.signature(), "full=kv:plain:bf16@64,sliding=kv:plain:bf16@64");
}

TEST(Scheme, SignaturesNameEveryPartAndTheLayout) {
  LayerKvSpec spec{KvCodecSpec::Affine(8, 64), 512};
  EXPECT_EQ(spec.signature(), "kv:affine:8:64@512");
  spec.delay = 0;  // convert before the second step
  EXPECT_EQ(spec.signature(), "kv:affine:8:64@0");
  EXPECT_EQ((LayerKvSpec{KvCodecSpec::Turbo(4, 3), -1}).signature(), "kv:turbo:k4v3");
  KvScheme s = MustParse("affine:8");
  s.sliding_ring = false;
  EXPECT_EQ(s.signature(), "full=kv:affine:8:64,sliding=unbounded+kv:affine:8:64");
  EXPECT_NE(s, MustParse("affine:8"));
  // Every codec signature parses back to itself.
  for (const char* sig : {"kv:plain", "kv:plain:bf16", "kv:plain:f16", "kv:affine:4:64", "kv:affine:8:32",
                          "kv:turbo:k8v3", "kv:turbo:k2v5"}) {
    auto codec = KvCodecSpec::FromSignature(sig);
    ASSERT_TRUE(codec.ok()) << sig << ": " << codec.status().ToString();
    EXPECT_EQ(codec->signature(), sig);
  }
  EXPECT_FALSE(KvCodecSpec::FromSignature("kv:ring:512+kv:plain").ok());
}

TEST(Scheme, RefusesMalformedSpecs) {
  for (const char* bad : {"", "affine", "affine:3", "affine:4:48", "turbo:k3v3", "turbo:k8v6", "turbo:k8", "plain@",
                          "full=plain,full=plain", "middle=plain", "full=", "affine:4@x", "bf16", "plain:bf8",
                          "plain:", "plain:bf16:64", "full=plain,", ",sliding=plain", "plain@-1", "affine:8@1e3"}) {
    auto r = KvScheme::Parse(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' should be refused";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(r.status().message().find("[kv]"), std::string::npos) << r.status().message();
    }
  }
}

}  // namespace
}  // namespace g4
