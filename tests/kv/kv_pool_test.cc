// KvPool bookkeeping: layout and block bytes per store, codec/geometry
// errors, exact byte accounting under a random workload of many sequences,
// prefix sharing, and the sliding-window bound.
#include "kv/kv_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv_test_util.h"

namespace g4 {
namespace {

using testing::Append;
using testing::Capacity;
using testing::CeilDiv;
using testing::MakeConfig;
using testing::MakePool;
using testing::MustParseScheme;
using testing::SynthConfig;
using testing::Table;

TEST(KvPoolLayout, BlockBytesAreBlockSizeTimesTheGroupsRecords) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  struct Case {
    std::string spec;
    KvCodecSpec full[2], sliding[2];  // per store; kind plain f32 + unused when not delayed
    int full_stores, sliding_stores;
  };
  const KvCodecSpec f32 = KvCodecSpec::Plain();
  const Case cases[] = {
      {"plain", {f32}, {f32}, 1, 1},
      {"plain:bf16", {KvCodecSpec::Plain(DType::kBF16)}, {KvCodecSpec::Plain(DType::kBF16)}, 1, 1},
      {"affine:4", {KvCodecSpec::Affine(4, 64)}, {KvCodecSpec::Affine(4, 32)}, 1, 1},  // narrowed to head_dim 32
      {"turbo", {KvCodecSpec::Turbo(8, 3)}, {f32}, 1, 1},
      {"affine:8@20", {f32, KvCodecSpec::Affine(8, 64)}, {f32, KvCodecSpec::Affine(8, 32)}, 2, 2},
      {"full=turbo:k4v3@5,sliding=plain:f16", {f32, KvCodecSpec::Turbo(4, 3)}, {KvCodecSpec::Plain(DType::kF16)}, 2,
       1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    for (int bs : {16, 5}) {
      auto pool = MakePool(config, c.spec, *backend, Capacity(7, bs));
      ASSERT_NE(pool, nullptr);
      size_t per_token = 0, capacity = 0;
      for (int g = 0; g < kNumKvGroups; ++g) {
        const int stores = g == 0 ? c.full_stores : c.sliding_stores;
        for (int s = 0; s < 2; ++s) {
          size_t record_bytes = 0;
          for (int l = 0; l < config.num_hidden_layers && s < stores; ++l) {
            const LayerGeometry& geo = config.layers[l];
            if (geo.kv_shared || static_cast<int>(geo.type == AttentionType::kSliding) != g) continue;
            auto f = KvRecordFormat::Make(g == 0 ? c.full[s] : c.sliding[s], geo.num_kv_heads, geo.head_dim);
            ASSERT_TRUE(f.ok());
            record_bytes += f->record_bytes;
            EXPECT_EQ(pool->LayerKv(l, {}).store[s].format, *f) << "layer " << l;
            EXPECT_EQ(pool->LayerKv(l, {}).store[s].num_blocks, 8);  // + the padding block
          }
          EXPECT_EQ(pool->block_bytes(static_cast<KvGroup>(g), s), record_bytes * bs) << g << "/" << s;
          EXPECT_EQ(pool->capacity_blocks(static_cast<KvGroup>(g), s), s < stores ? 7 : 0);
          capacity += pool->capacity_blocks(static_cast<KvGroup>(g), s) * record_bytes * bs;
          if (s == stores - 1) per_token += record_bytes;
        }
      }
      EXPECT_EQ(pool->bytes_per_token(), per_token);
      EXPECT_EQ(pool->capacity_bytes(), capacity);
      EXPECT_EQ(pool->used_bytes(), 0u);
    }
  }
}

TEST(KvPoolLayout, SharedLayersReadTheirDonorsStorage) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  auto pool = MakePool(config, "affine:8@4", *backend, Capacity(4));
  ASSERT_NE(pool, nullptr);
  int shared = 0;
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    if (!config.layers[l].kv_shared) continue;
    ++shared;
    const int d = config.layers[l].donor;
    EXPECT_EQ(pool->group_of_layer(l), pool->group_of_layer(d));
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(pool->LayerKv(l, {}).store[s].records, pool->LayerKv(d, {}).store[s].records);
      EXPECT_NE(pool->LayerKv(l, {}).store[s].records, nullptr);
    }
  }
  EXPECT_EQ(shared, 2);
  EXPECT_EQ(pool->group_of_layer(2), KvGroup::kFull);
  EXPECT_EQ(pool->group_of_layer(0), KvGroup::kSliding);
}

TEST(KvPoolLayout, ACodecThatDoesNotFitALayerIsAnErrorNamingIt) {
  auto backend = MakeCpuBackend();
  SynthConfig s;
  s.global_head_dim = 48;  // not a power of two, not a multiple of 32
  const Gemma4Config config = MakeConfig(s);
  for (const char* spec : {"turbo", "affine:4:32", "full=affine:8:64@16"}) {
    auto pool = KvPool::Create(config, MustParseScheme(spec), *backend, Capacity(4));
    ASSERT_FALSE(pool.ok()) << spec;
    EXPECT_NE(pool.status().message().find("layer 2"), std::string::npos) << pool.status().message();
    EXPECT_NE(pool.status().message().find("[kv]"), std::string::npos) << pool.status().message();
  }
  // Plain storage takes any head_dim.
  s.head_dim = 40;
  for (const char* spec : {"plain", "plain:bf16", "full=plain,sliding=plain:f16"})
    EXPECT_NE(MakePool(MakeConfig(s), spec, *backend, Capacity(4)), nullptr) << spec;
}

// What the pool's tables say is in use: distinct block ids per (group, store)
// over every live sequence, checked against the pool's own counters.
void CheckAccounting(const KvPool& pool, const std::vector<std::unique_ptr<KvSeq>>& seqs, int window) {
  std::set<int32_t> used[kNumKvGroups][2];
  for (const auto& seq : seqs) {
    for (int g = 0; g < kNumKvGroups; ++g) {
      uint8_t store = 0;
      const std::vector<int32_t> t = Table(pool, *seq, static_cast<KvGroup>(g), &store);
      int64_t held = 0;
      for (int32_t b : t) {
        if (b < 0) continue;
        ASSERT_GE(b, 1) << "block 0 is never handed out";
        ASSERT_LE(b, pool.capacity_blocks(static_cast<KvGroup>(g), store));
        used[g][store].insert(b);
        ++held;
      }
      ASSERT_EQ(pool.blocks_held(*seq, static_cast<KvGroup>(g)), held);
      ASSERT_EQ(static_cast<int64_t>(t.size()), CeilDiv(seq->length(), pool.block_size()));
      if (g == 1 && window > 0) {
        ASSERT_LE(held, CeilDiv(window, pool.block_size()) + 1) << "sliding blocks beyond window + one block";
      }
    }
  }
  size_t bytes = 0;
  for (int g = 0; g < kNumKvGroups; ++g) {
    for (int s = 0; s < 2; ++s) {
      const KvGroup group = static_cast<KvGroup>(g);
      ASSERT_EQ(pool.blocks_in_use(group, s), static_cast<int64_t>(used[g][s].size())) << g << "/" << s;
      ASSERT_EQ(pool.blocks_in_use(group, s) + pool.free_blocks(group, s), pool.capacity_blocks(group, s));
      bytes += used[g][s].size() * pool.block_bytes(group, s);
    }
  }
  ASSERT_EQ(pool.used_bytes(), bytes);
}

TEST(KvPoolAccounting, UsedBytesAreBlocksInUseTimesBlockBytesThroughARandomWorkload) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  std::mt19937 rng(2024);
  const char* specs[] = {"plain", "full=turbo:k8v3@40,sliding=affine:4:32@24", "affine:8@0"};
  for (const char* spec : specs) {
    for (int bs : {16, 5}) {
      SCOPED_TRACE(std::string(spec) + " block " + std::to_string(bs));
      auto pool = MakePool(config, spec, *backend, Capacity(90, bs));
      ASSERT_NE(pool, nullptr);
      std::vector<std::unique_ptr<KvSeq>> seqs;
      int refused = 0, forks = 0, trims = 0, conversions = 0;
      for (int it = 0; it < 600; ++it) {
        const int op = static_cast<int>(rng() % 10);
        if (op == 0 || seqs.empty()) {
          if (seqs.size() < 12) seqs.push_back(std::make_unique<KvSeq>(pool->NewSequence()));
        } else if (op <= 4) {
          KvSeq& seq = *seqs[rng() % seqs.size()];
          const int64_t want = 1 + static_cast<int64_t>(rng() % 24);
          const size_t before = pool->used_bytes();
          const int64_t length = seq.length();
          const Status s = Append(*pool, seq, std::min(want, pool->max_append_tokens(seq)));
          if (!s.ok()) {
            ++refused;
            ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
            ASSERT_EQ(pool->used_bytes(), before) << "a refused append changed the pool";
            ASSERT_EQ(seq.length(), length);
          }
        } else if (op == 5) {
          KvSeq& seq = *seqs[rng() % seqs.size()];
          const int64_t n = static_cast<int64_t>(rng() % (seq.length() + 1));
          auto child = pool->Fork(seq, n);
          ASSERT_EQ(child.ok(), pool->CanCut(seq, n));
          if (child.ok() && seqs.size() < 16) {
            ++forks;
            EXPECT_EQ(child->length(), n);
            seqs.push_back(std::make_unique<KvSeq>(std::move(child).value()));
          }
        } else if (op == 6) {
          KvSeq& seq = *seqs[rng() % seqs.size()];
          const int64_t n = static_cast<int64_t>(rng() % (seq.length() + 1));
          const bool can = pool->CanCut(seq, n);
          const int64_t length = seq.length();
          const Status s = pool->Trim(seq, n);
          ASSERT_EQ(s.ok(), can);
          ASSERT_EQ(seq.length(), can ? n : length);
          trims += can;
        } else if (op == 7) {
          seqs.erase(seqs.begin() + static_cast<long>(rng() % seqs.size()));
        } else {
          KvSeq& seq = *seqs[rng() % seqs.size()];
          const int64_t at = pool->converted_at(seq, KvGroup::kFull);
          const Status s = pool->Maintain(seq);
          if (s.ok()) conversions += at < 0 && pool->converted_at(seq, KvGroup::kFull) >= 0;
          else ASSERT_EQ(s.code(), StatusCode::kResourceExhausted);
        }
        ASSERT_NO_FATAL_FAILURE(CheckAccounting(*pool, seqs, config.sliding_window)) << "after op " << op;
      }
      EXPECT_GT(forks, 5);
      EXPECT_GT(trims, 5);
      if (std::string(spec) != "plain") {
        EXPECT_GT(conversions, 0);
      }
      seqs.clear();
      EXPECT_EQ(pool->used_bytes(), 0u);
    }
  }
}

TEST(KvPoolAccounting, SixteenSequencesSharingAPrefixStoreItOnce) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  for (const char* spec : {"plain", "affine:4"}) {
    SCOPED_TRACE(spec);
    auto pool = MakePool(config, spec, *backend, Capacity(400));
    ASSERT_NE(pool, nullptr);
    const int64_t bs = pool->block_size(), prefix = 1000;
    KvSeq parent = pool->NewSequence();
    for (int64_t done = 0; done < prefix; done += 100) ASSERT_TRUE(Append(*pool, parent, 100).ok());
    const size_t one_copy = pool->used_bytes();
    EXPECT_EQ(one_copy, pool->ProjectedBytes(prefix));
    std::vector<KvSeq> forks;
    int64_t full_blocks = CeilDiv(prefix, bs), sliding_blocks = pool->blocks_held(parent, KvGroup::kSliding);
    size_t tails = 0;
    for (int i = 0; i < 16; ++i) {
      auto f = pool->Fork(parent, prefix);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      forks.push_back(std::move(f).value());
      EXPECT_EQ(pool->used_bytes(), one_copy) << "a fork copies nothing";
    }
    for (int i = 0; i < 16; ++i) {
      const int64_t tail = 1 + i;
      ASSERT_TRUE(Append(*pool, forks[i], tail).ok());
      // Its own blocks: a copy of the shared partial last block, and new ones.
      const int64_t own_full = 1 + CeilDiv(prefix + tail, bs) - CeilDiv(prefix, bs);
      full_blocks += own_full;
      const int64_t window_from = std::max<int64_t>(0, prefix + tail - config.sliding_window + 1);
      sliding_blocks += (prefix + tail - 1) / bs - window_from / bs + 1;
      tails += own_full * pool->block_bytes(KvGroup::kFull, 0);
    }
    EXPECT_EQ(pool->blocks_in_use(KvGroup::kFull, 0), full_blocks);
    EXPECT_EQ(pool->blocks_in_use(KvGroup::kSliding, 0), sliding_blocks);
    EXPECT_EQ(pool->used_bytes(), full_blocks * pool->block_bytes(KvGroup::kFull, 0) +
                                      sliding_blocks * pool->block_bytes(KvGroup::kSliding, 0));
    // One copy of the prefix plus the tails, far from sixteen copies.
    EXPECT_LE(pool->used_bytes(), one_copy + tails + 17 * 2 * pool->block_bytes(KvGroup::kSliding, 0));
    EXPECT_LT(pool->used_bytes(), 2 * one_copy);
    forks.clear();
    EXPECT_EQ(pool->used_bytes(), one_copy);
  }
}

TEST(KvPoolAccounting, ASlidingLayerHoldsItsWindowPlusOneBlockBetweenSteps) {
  auto backend = MakeCpuBackend();
  std::mt19937 rng(9);
  struct Geometry {
    int window, block_size;
  };
  for (const Geometry geo : {Geometry{8, 16}, Geometry{8, 4}, Geometry{13, 5}, Geometry{1, 3}, Geometry{32, 8}}) {
    SCOPED_TRACE("window " + std::to_string(geo.window) + " block " + std::to_string(geo.block_size));
    SynthConfig s;
    s.sliding_window = geo.window;
    const Gemma4Config config = MakeConfig(s);
    KvPoolOptions options = Capacity(100, geo.block_size);
    options.capacity_blocks[0][0] = 1000;  // full layers keep every token
    auto pool = MakePool(config, "plain", *backend, options);
    ASSERT_NE(pool, nullptr);
    std::vector<KvSeq> seqs;
    for (int i = 0; i < 4; ++i) seqs.push_back(pool->NewSequence());
    const int64_t bs = geo.block_size, bound = CeilDiv(geo.window, bs) + 1;
    for (int it = 0; it < 120; ++it) {
      KvSeq& seq = seqs[rng() % seqs.size()];
      const int64_t n = 1 + static_cast<int64_t>(rng() % 30);
      ASSERT_TRUE(pool->PrepareAppend(seq, n).ok());
      // During the step: the window plus the chunk.
      EXPECT_LE(pool->blocks_held(seq, KvGroup::kSliding), CeilDiv(geo.window + n, bs) + 1);
      pool->Commit(seq, n);
      const int64_t length = seq.length();
      // Exactly the blocks holding tokens the next query can see.
      const int64_t from = std::max<int64_t>(0, length - geo.window + 1);
      EXPECT_EQ(pool->blocks_held(seq, KvGroup::kSliding), (length - 1) / bs - from / bs + 1) << "at " << length;
      for (const KvSeq& other : seqs) ASSERT_LE(pool->blocks_held(other, KvGroup::kSliding), bound);
      const std::vector<int32_t> t = Table(*pool, seq, KvGroup::kSliding);
      for (int64_t i = 0; i < static_cast<int64_t>(t.size()); ++i)
        EXPECT_EQ(t[i] >= 0, (i + 1) * bs - 1 >= from) << "entry " << i << " at length " << length;
      EXPECT_EQ(pool->blocks_held(seq, KvGroup::kFull), CeilDiv(length, bs));  // full layers keep everything
    }
  }
  // Unbounded sliding layers (sliding_ring false) keep every block.
  const Gemma4Config config = MakeConfig();
  KvScheme scheme = MustParseScheme("plain");
  scheme.sliding_ring = false;
  auto pool = KvPool::Create(config, scheme, *backend, Capacity(20));
  ASSERT_TRUE(pool.ok());
  KvSeq seq = (*pool)->NewSequence();
  ASSERT_TRUE(Append(**pool, seq, 100).ok());
  EXPECT_EQ((*pool)->blocks_held(seq, KvGroup::kSliding), CeilDiv(100, 16));
  EXPECT_TRUE((*pool)->CanCut(seq, 3));
}

}  // namespace
}  // namespace g4
