// Layouts and policies: rings against unbounded caches, exact byte
// accounting, trim and copy-on-write clones, delayed conversion, signatures
// and the --kv grammar.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/ops.h"
#include "kv/caches.h"
#include "kv/kv_codec.h"
#include "kv/kv_scheme.h"
#include "test_util.h"

namespace g4 {
namespace {

constexpr int kHeads = 4, kKvHeads = 2, kDim = 64;
constexpr int64_t kWidth = kKvHeads * kDim;

std::unique_ptr<LayerCache> Make(const LayerKvSpec& spec, int window) {
  auto c = MakeLayerCache(spec, kKvHeads, kDim, window);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// Appends tokens [from, from + n) with K/V derived from the position, so two
// caches fed the same positions hold the same numbers.
KvView Feed(LayerCache& c, int32_t from, int64_t n) {
  std::vector<float> k(n * kWidth), v(n * kWidth);
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) {
    pos[i] = from + static_cast<int32_t>(i);
    const auto kr = testing::RandomFloats(kWidth, 1000 + pos[i], -2, 2);
    const auto vr = testing::RandomFloats(kWidth, 5000 + pos[i], -2, 2);
    std::copy(kr.begin(), kr.end(), k.begin() + i * kWidth);
    std::copy(vr.begin(), vr.end(), v.begin() + i * kWidth);
  }
  return c.AppendAndView(k.data(), v.data(), pos.data(), n);
}

std::vector<float> Attend(Ops& ops, const KvView& view, int32_t from, int64_t n, int window) {
  const auto q = testing::RandomFloats(n * kHeads * kDim, 9000 + from, -0.5, 0.5);
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = from + static_cast<int32_t>(i);
  std::vector<float> out(n * kHeads * kDim);
  AttentionArgs a;
  a.q = q.data();
  a.q_pos = pos.data();
  a.num_queries = n;
  a.num_heads = kHeads;
  a.num_kv_heads = kKvHeads;
  a.head_dim = kDim;
  a.window = window;
  a.out = out.data();
  view.attention->Attend(ops, a);
  return out;
}

const LayerKvSpec kSpecs[] = {{KvCodecSpec::Plain(), -1},      {KvCodecSpec::Affine(8, 64), -1},
                              {KvCodecSpec::Affine(4, 32), -1}, {KvCodecSpec::Turbo(8, 3), -1},
                              {KvCodecSpec::Turbo(4, 3), -1},   {KvCodecSpec::Turbo(8, 3), 7}};

TEST(Ring, MatchesUnboundedCacheOverSeveralWindows) {
  auto ops = MakeCpuOps();
  const int window = 8;
  for (const LayerKvSpec& spec : kSpecs) {
    auto ring = Make(spec, window), full = Make(spec, 0);
    int32_t at = 0;
    for (int64_t n : {3, 1, 1, 6, 1, 13, 1, 1, 1, 9, 2, 1, 20, 1, 1}) {
      const KvView rv = Feed(*ring, at, n), fv = Feed(*full, at, n);
      EXPECT_LE(rv.num_keys, std::max<int64_t>(window + n, window));
      const auto a = Attend(*ops, rv, at, n, window), b = Attend(*ops, fv, at, n, window);
      auto m = testing::Compare(b.data(), a.data(), a.size(), 0.0);  // bit-identical
      ASSERT_TRUE(m.ok) << spec.signature() << " at " << at << " chunk " << n << ": " << m.ToString();
      at += static_cast<int32_t>(n);
    }
    EXPECT_GT(at, 6 * window);
    EXPECT_EQ(ring->offset(), at);
    EXPECT_EQ(ring->allocated_bytes(), window * ring->bytes_per_token());  // exactly the window
  }
}

TEST(Accounting, AllocatedBytesMatchProjectionAndRecordSizes) {
  struct Case {
    LayerKvSpec spec;
    int64_t record;  // bytes per token, all KV heads, K + V
  };
  const Case cases[] = {
      {{KvCodecSpec::Plain(), -1}, 2 * kWidth * 4},
      {{KvCodecSpec::Affine(8, 64), -1}, 2 * (kWidth + 4 * kWidth / 64)},
      {{KvCodecSpec::Affine(4, 64), -1}, 2 * (kWidth / 2 + 4 * kWidth / 64)},
      {{KvCodecSpec::Affine(4, 32), -1}, 2 * (kWidth / 2 + 4 * kWidth / 32)},
      // reference-system.md: k8v3 is 200 bytes per token per head at d=128,
      // i.e. (8 + 3) / 8 bytes per element + 6 bytes per group of 32.
      {{KvCodecSpec::Turbo(8, 3), -1}, kWidth * 11 / 8 + 6 * kWidth / 32},
      {{KvCodecSpec::Turbo(4, 3), -1}, kWidth * 7 / 8 + 6 * kWidth / 32},
  };
  for (const Case& c : cases) {
    for (int window : {0, 300}) {
      auto cache = Make(c.spec, window);
      EXPECT_EQ(cache->bytes_per_token(), static_cast<size_t>(c.record + 4)) << c.spec.signature();  // + position
      EXPECT_EQ(cache->allocated_bytes(), 0u);
      int32_t at = 0;
      for (int64_t n : {1, 100, 155, 1, 1, 300, 1, 700}) {
        Feed(*cache, at, n);
        at += static_cast<int32_t>(n);
        EXPECT_EQ(cache->allocated_bytes(), cache->ProjectedBytes(at)) << c.spec.signature() << " at " << at;
      }
      // Whole ladder steps cost exactly tokens x bytes per token.
      EXPECT_EQ(cache->ProjectedBytes(4096), (window ? 300u : 4096u) * cache->bytes_per_token());
      EXPECT_EQ(cache->ProjectedBytes(32768), (window ? 300u : 32768u) * cache->bytes_per_token());
    }
  }
}

TEST(Reuse, TrimThenAppendEqualsAFreshRun) {
  auto ops = MakeCpuOps();
  for (const LayerKvSpec& spec : kSpecs) {
    if (spec.delay >= 0) continue;
    for (int window : {0, 64}) {
      auto a = Make(spec, window), b = Make(spec, window);
      Feed(*a, 0, 40);
      ASSERT_NE(a->reuse(), nullptr);
      ASSERT_TRUE(a->reuse()->trimmable());
      ASSERT_TRUE(a->reuse()->Trim(25).ok());
      EXPECT_EQ(a->offset(), 25);
      Feed(*b, 0, 25);
      const KvView va = Feed(*a, 25, 3), vb = Feed(*b, 25, 3);
      const auto x = Attend(*ops, va, 25, 3, window), y = Attend(*ops, vb, 25, 3, window);
      EXPECT_EQ(x, y) << spec.signature();
      EXPECT_FALSE(a->reuse()->Trim(29).ok());  // past the end
    }
  }
  auto ring = Make({KvCodecSpec::Plain(), -1}, 8);
  Feed(*ring, 0, 8);
  EXPECT_TRUE(ring->reuse()->trimmable());  // full but not wrapped
  Feed(*ring, 8, 1);
  EXPECT_FALSE(ring->reuse()->trimmable());
  const Status s = ring->reuse()->Trim(4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wrapped"), std::string::npos) << s.message();
  EXPECT_EQ(ring->offset(), 9);
}

TEST(Reuse, ClonesShareStorageUntilWritten) {
  auto ops = MakeCpuOps();
  for (const LayerKvSpec& spec : kSpecs) {
    auto a = Make(spec, 0);
    const KvView before = Feed(*a, 0, 30);
    auto b = a->reuse()->Clone();
    EXPECT_EQ(b->signature(), a->signature());
    EXPECT_EQ(b->offset(), 30);
    // Zero-copy: the clone's held records are the original's.
    const auto* ca = a->donor_capture()->CaptureDonorAttention().release();
    const auto* cb = b->donor_capture()->CaptureDonorAttention().release();
    EXPECT_EQ(ca->view().num_keys, cb->view().num_keys);
    delete ca;
    delete cb;
    // Diverge: trim the clone and write different tokens; the original is untouched.
    ASSERT_TRUE(b->reuse()->Trim(20).ok());
    Feed(*b, 100, 5);
    auto c = Make(spec, 0);
    Feed(*c, 0, 30);
    const KvView va = Feed(*a, 30, 2), vc = Feed(*c, 30, 2);
    EXPECT_EQ(Attend(*ops, va, 30, 2, 0), Attend(*ops, vc, 30, 2, 0)) << spec.signature();
    EXPECT_EQ(b->offset(), 25);
  }
}

TEST(Delayed, PlainAndBitIdenticalBeforeItsBoundaryThenConvertsOnce) {
  auto ops = MakeCpuOps();
  const int64_t boundary = 16;
  for (int window : {0, 8}) {
    auto delayed = Make({KvCodecSpec::Turbo(8, 3), boundary}, window);
    auto plain = Make({KvCodecSpec::Plain(), -1}, window);
    auto turbo = Make({KvCodecSpec::Turbo(8, 3), -1}, window);
    ASSERT_NE(delayed->precision_maintenance(), nullptr);
    EXPECT_EQ(plain->precision_maintenance(), nullptr);
    EXPECT_EQ(delayed->signature(), std::string(window ? "kv:ring:8+" : "") + "kv:turbo:k8v3@16");
    int32_t at = 0;
    for (int64_t n : {5, 1, 4, 6, 1, 1, 3}) {
      if (at > 0 && at < boundary) EXPECT_EQ(delayed->precision_maintenance()->max_append_tokens(), boundary - at);
      const KvView dv = Feed(*delayed, at, n), pv = Feed(*plain, at, n);
      Feed(*turbo, at, n);
      const auto x = Attend(*ops, dv, at, n, window), y = Attend(*ops, pv, at, n, window);
      if (at < boundary) {
        EXPECT_EQ(x, y) << "step at " << at << " must be bit-identical to plain";
        EXPECT_NE(dv.k, nullptr);
        EXPECT_EQ(delayed->reuse()->minimum_reusable_offset(), 0);
      } else {
        EXPECT_EQ(dv.k, nullptr) << "converted by now";
        EXPECT_NE(dv.attention->rotated_values(), nullptr);
        EXPECT_EQ(delayed->reuse()->minimum_reusable_offset(), boundary);  // converted when holding 16
        EXPECT_EQ(delayed->precision_maintenance()->max_append_tokens(), std::numeric_limits<int64_t>::max());
        EXPECT_NE(x, y);
      }
      at += static_cast<int32_t>(n);
    }
    // Converted caches attend exactly as a cache encoded from the start: the
    // codec encodes each token independently of when.
    const KvView dv = Feed(*delayed, at, 1), tv = Feed(*turbo, at, 1);
    EXPECT_EQ(Attend(*ops, dv, at, 1, window), Attend(*ops, tv, at, 1, window));
    EXPECT_FALSE(delayed->reuse()->Trim(boundary - 1).ok());
  }
}

TEST(Delayed, NeverConvertsInsideTheFirstChunk) {
  auto delayed = Make({KvCodecSpec::Affine(4, 64), 8}, 0);
  const KvView first = Feed(*delayed, 0, 20);  // one prefill chunk past the boundary
  EXPECT_NE(first.k, nullptr) << "the first chunk stays plain";
  EXPECT_EQ(delayed->precision_maintenance()->max_append_tokens(), 0);  // conversion due
  ASSERT_TRUE(delayed->precision_maintenance()->Maintain().ok());
  EXPECT_EQ(delayed->reuse()->minimum_reusable_offset(), 20);
  const KvView next = Feed(*delayed, 20, 1);
  EXPECT_EQ(next.k, nullptr);
  ASSERT_NE(next.attention->quantized(), nullptr);
  EXPECT_EQ(next.num_keys, 21);
}

TEST(Signatures, NameCodecLayoutAndPolicy) {
  EXPECT_EQ(Make({KvCodecSpec::Plain(), -1}, 0)->signature(), "kv:plain");
  EXPECT_EQ(Make({KvCodecSpec::Plain(), -1}, 1024)->signature(), "kv:ring:1024+kv:plain");
  EXPECT_EQ(Make({KvCodecSpec::Affine(4, 64), -1}, 0)->signature(), "kv:affine:4:64");
  EXPECT_EQ(Make({KvCodecSpec::Turbo(8, 3), -1}, 1024)->signature(), "kv:ring:1024+kv:turbo:k8v3");
  EXPECT_EQ(Make({KvCodecSpec::Affine(8, 64), 512}, 0)->signature(), "kv:affine:8:64@512");
  // A group wider than head_dim is narrowed, and the signature says so.
  auto narrow = MakeLayerCache({KvCodecSpec::Affine(8, 64), -1}, 2, 32, 0);
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ((*narrow)->signature(), "kv:affine:8:32");
  // TurboQuant needs a power-of-two head_dim.
  auto bad = MakeLayerCache({KvCodecSpec::Turbo(8, 3), -1}, 2, 96, 0);
  EXPECT_FALSE(bad.ok());
  for (const char* s : {"kv:plain", "kv:affine:4:64", "kv:turbo:k8v3"}) {
    auto spec = KvCodecSpec::FromSignature(s);
    ASSERT_TRUE(spec.ok());
    EXPECT_EQ(spec->signature(), s);
  }
}

TEST(Scheme, ParsesTheKvGrammar) {
  auto p = KvScheme::Parse("plain");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->signature(), "full=kv:plain,sliding=kv:plain");
  p = KvScheme::Parse("affine:4");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->signature(), "full=kv:affine:4:64,sliding=kv:affine:4:64");
  p = KvScheme::Parse("affine:4:32@100");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->full.delay, 100);
  EXPECT_EQ(p->signature(), "full=kv:affine:4:32@100,sliding=kv:affine:4:32@100");
  p = KvScheme::Parse("turbo:k4v3");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->signature(), "full=kv:turbo:k4v3,sliding=kv:plain");  // turbo: full layers only
  p = KvScheme::Parse("turbo");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->full.codec, KvCodecSpec::Turbo(8, 3));
  p = KvScheme::Parse("sliding=affine:8,full=turbo:k8v3@64");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->signature(), "full=kv:turbo:k8v3@64,sliding=kv:affine:8:64");
  for (const char* bad : {"", "affine", "affine:3", "affine:4:48", "turbo:k3v3", "turbo:k8v6", "turbo:k8", "plain@",
                          "full=plain,full=plain", "middle=plain", "full=", "affine:4@x", "bf16"}) {
    auto r = KvScheme::Parse(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' should be refused";
    if (!r.ok()) EXPECT_NE(r.status().message().find("[kv]"), std::string::npos);
  }
}

TEST(DonorCapture, RowsAreChronologicalAndCapturedViewsOutliveAppends) {
  auto ops = MakeCpuOps();
  auto ring = Make({KvCodecSpec::Affine(8, 64), -1}, 8);
  Feed(*ring, 0, 13);
  const DonorRows rows = ring->donor_capture()->CaptureDonorRows();
  ASSERT_EQ(rows.pos.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(rows.pos[i], 5 + i);
  auto captured = ring->donor_capture()->CaptureDonorAttention();
  const auto before = Attend(*ops, captured->view(), 13, 1, 8);
  Feed(*ring, 13, 4);  // overwrites half the ring
  EXPECT_EQ(Attend(*ops, captured->view(), 13, 1, 8), before);
}

}  // namespace
}  // namespace g4
