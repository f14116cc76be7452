// The bytes in the pool: what Ops::KvWrite puts through the pool's tables is
// what Export reads back (the host reference encoder's records, for every
// codec), copy-on-write keeps a fork's source intact, and a delayed precision
// change re-encodes exactly EncodeKvRecords(DecodeKvRecords(plain)).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_pool.h"
#include "kv_test_util.h"

namespace g4 {
namespace {

using testing::Capacity;
using testing::ExpectedRecords;
using testing::MakeConfig;
using testing::MakePool;
using testing::MustParseScheme;
using testing::SynthConfig;
using testing::WriteStep;

// The format layer l of seq uses now (its store's).
KvRecordFormat FormatOf(const KvPool& pool, const KvSeq& seq, int layer) {
  const KvSeq* one[] = {&seq};
  uint8_t store = 0;
  std::vector<int32_t> table(static_cast<size_t>(std::max<int64_t>(1, pool.TableWidth(one, pool.group_of_layer(layer)))));
  pool.FillTables(one, pool.group_of_layer(layer), table.data(), static_cast<int64_t>(table.size()), &store);
  return pool.LayerKv(layer, {}).store[store].format;
}

// A sequence's content as runs: tokens [begin, next run's begin) of `content`.
struct Run {
  int64_t begin;
  uint32_t content;
};

// Export(seq) equals the reference encoding of its runs, layer by layer.
void ExpectRecords(const KvPool& pool, const KvSeq& seq, const std::vector<Run>& runs, const std::string& label) {
  const int64_t length = seq.length();
  const std::vector<KvPool::LayerRecords> layers = pool.Export(seq);
  int owned = 0;
  for (int l = 0; l < pool.config().num_hidden_layers; ++l) owned += !pool.config().layers[l].kv_shared;
  ASSERT_EQ(static_cast<int>(layers.size()), owned) << label;
  for (const KvPool::LayerRecords& rec : layers) {
    const KvRecordFormat f = FormatOf(pool, seq, rec.layer);
    EXPECT_EQ(rec.signature, f.signature());
    const int window = pool.group_of_layer(rec.layer) == KvGroup::kSliding ? pool.config().sliding_window : 0;
    EXPECT_EQ(rec.first_token, window > 0 ? std::max<int64_t>(0, length - window + 1) : 0) << label;
    std::vector<uint8_t> want;
    for (size_t r = 0; r < runs.size(); ++r) {
      const int64_t from = std::max(runs[r].begin, rec.first_token);
      const int64_t to = r + 1 < runs.size() ? runs[r + 1].begin : length;
      if (from >= to) continue;
      const std::vector<uint8_t> part = ExpectedRecords(f, runs[r].content, rec.layer, from, to);
      want.insert(want.end(), part.begin(), part.end());
    }
    ASSERT_EQ(rec.records.size(), want.size()) << label << " layer " << rec.layer;
    EXPECT_TRUE(rec.records == want) << label << ": layer " << rec.layer << " (" << rec.signature
                                     << ") holds other bytes than the reference encoder's";
  }
}

TEST(KvPoolData, KvWriteThroughTheTablesIsWhatExportReadsBack) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  std::mt19937 rng(41);
  for (const char* spec : {"plain", "plain:bf16", "plain:f16", "affine:8", "affine:4:32", "turbo:k8v3",
                           "full=turbo:k4v3,sliding=affine:8:32"}) {
    for (int bs : {16, 5}) {
      const std::string label = std::string(spec) + " block " + std::to_string(bs);
      auto pool = MakePool(config, spec, *backend, Capacity(80, bs));
      ASSERT_NE(pool, nullptr);
      std::vector<KvSeq> seqs;
      for (int i = 0; i < 3; ++i) seqs.push_back(pool->NewSequence());
      // Mixed steps: chunks of some sequences, single rows of others.
      for (int step = 0; step < 8; ++step) {
        std::vector<KvSeq*> batch;
        std::vector<int64_t> n;
        std::vector<uint32_t> content;
        for (int i = 0; i < 3; ++i) {
          if (rng() % 4 == 0) continue;
          batch.push_back(&seqs[i]);
          n.push_back(rng() % 2 ? 1 : 1 + static_cast<int64_t>(rng() % 13));
          content.push_back(100 + i);
        }
        if (batch.empty()) continue;
        const Status s = WriteStep(*pool, batch, n, content);
        ASSERT_TRUE(s.ok()) << s.ToString();
      }
      for (int i = 0; i < 3; ++i) ExpectRecords(*pool, seqs[i], {{0, 100u + i}}, label + " seq " + std::to_string(i));
    }
  }
}

TEST(KvPoolData, CopyOnWriteKeepsTheSourcesBytes) {
  auto backend = MakeCpuBackend();
  SynthConfig s;
  s.sliding_window = 40;  // the trimmed fork below keeps its window
  const Gemma4Config config = MakeConfig(s);
  for (const char* spec : {"plain", "affine:4:32", "turbo:k8v3"}) {
    SCOPED_TRACE(spec);
    auto pool = MakePool(config, spec, *backend, Capacity(60, 16));
    ASSERT_NE(pool, nullptr);
    KvSeq parent = pool->NewSequence();
    ASSERT_TRUE(WriteStep(*pool, {&parent}, {37}, {1}).ok());  // 2 full blocks + 5 tokens
    const auto before = pool->Export(parent);
    // A fork at the end shares the partly filled block; one in the middle of
    // it shares it too, holding tokens past its own end.
    KvSeq at_end = std::move(pool->Fork(parent, 37).value());
    KvSeq inside = std::move(pool->Fork(parent, 30).value());
    const size_t shared = pool->used_bytes();
    ASSERT_TRUE(WriteStep(*pool, {&at_end, &inside}, {4, 9}, {2, 3}).ok());
    EXPECT_GT(pool->used_bytes(), shared) << "the writers copied the shared block";
    const auto after = pool->Export(parent);
    ASSERT_EQ(after.size(), before.size());
    for (size_t l = 0; l < after.size(); ++l)
      EXPECT_TRUE(after[l].records == before[l].records) << "layer " << after[l].layer << " of the source changed";
    ExpectRecords(*pool, parent, {{0, 1}}, "parent");
    ExpectRecords(*pool, at_end, {{0, 1}, {37, 2}}, "fork at 37");
    ExpectRecords(*pool, inside, {{0, 1}, {30, 3}}, "fork at 30");
    // The source writes on; its forks keep their own bytes.
    ASSERT_TRUE(WriteStep(*pool, {&parent}, {20}, {1}).ok());
    ExpectRecords(*pool, at_end, {{0, 1}, {37, 2}}, "fork at 37 after the source wrote");
    ExpectRecords(*pool, inside, {{0, 1}, {30, 3}}, "fork at 30 after the source wrote");
    ExpectRecords(*pool, parent, {{0, 1}}, "parent after writing");
    // A trimmed fork rewrites its tail without touching the others.
    ASSERT_TRUE(pool->Trim(at_end, 33).ok());
    ASSERT_TRUE(WriteStep(*pool, {&at_end}, {6}, {4}).ok());
    ExpectRecords(*pool, at_end, {{0, 1}, {33, 4}}, "trimmed fork");
    ExpectRecords(*pool, parent, {{0, 1}}, "parent after the trimmed fork wrote");
  }
}

TEST(KvPoolData, DelayedConversionReencodesThePlainRecords) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();  // window 8: the sliding blocks release as they go
  for (const char* spec : {"affine:4:32@20", "affine:8@20", "turbo:k8v3@20", "turbo:k4v3@7", "plain:bf16@20",
                           "full=plain:f16@9,sliding=affine:8:32@20"}) {
    SCOPED_TRACE(spec);
    auto pool = MakePool(config, spec, *backend, Capacity(40, 16));
    ASSERT_NE(pool, nullptr);
    KvSeq seq = pool->NewSequence();
    const KvScheme scheme = MustParseScheme(spec);
    const int64_t first_delay = std::min(scheme.full.delayed() ? scheme.full.delay : INT64_MAX,
                                         scheme.sliding.delayed() ? scheme.sliding.delay : INT64_MAX);
    // Step to the first boundary with the scheduler's cut, writing real K/V.
    ASSERT_TRUE(WriteStep(*pool, {&seq}, {5}, {7}).ok());
    while (seq.length() < first_delay)
      ASSERT_TRUE(WriteStep(*pool, {&seq}, {std::min<int64_t>(6, pool->max_append_tokens(seq))}, {7}).ok());
    ASSERT_EQ(seq.length(), first_delay);
    for (int round = 0; round < 2; ++round) {
      const auto plain = pool->Export(seq);
      std::vector<bool> due(plain.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        const KvGroup g = pool->group_of_layer(plain[i].layer);
        const LayerKvSpec& spec_g = g == KvGroup::kFull ? scheme.full : scheme.sliding;
        due[i] = pool->converted_at(seq, g) < 0 && spec_g.delayed() && seq.length() >= spec_g.delay;
        if (due[i]) {
          EXPECT_EQ(plain[i].signature, "kv:plain");
        }
      }
      ASSERT_TRUE(pool->Maintain(seq).ok());
      const auto converted = pool->Export(seq);
      ASSERT_EQ(converted.size(), plain.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        if (!due[i]) {
          EXPECT_TRUE(converted[i].records == plain[i].records) << "layer " << plain[i].layer << " changed early";
          continue;
        }
        const int layer = plain[i].layer;
        const KvRecordFormat from = *KvRecordFormat::Make(KvCodecSpec::Plain(), config.layers[layer].num_kv_heads,
                                                          config.layers[layer].head_dim);
        const KvRecordFormat to = FormatOf(*pool, seq, layer);
        EXPECT_NE(to.signature(), "kv:plain");
        const int64_t n = seq.length() - plain[i].first_token;
        std::vector<float> k(n * from.width()), v(n * from.width());
        DecodeKvRecords(from, plain[i].records.data(), n, k.data(), v.data());
        std::vector<uint8_t> want(n * to.record_bytes);
        EncodeKvRecords(to, k.data(), v.data(), n, want.data());
        EXPECT_EQ(converted[i].first_token, plain[i].first_token);
        EXPECT_TRUE(converted[i].records == want) << "layer " << layer << ": re-encoded records differ";
      }
      // On to the second group's boundary, if any.
      while (pool->max_append_tokens(seq) < INT64_MAX && pool->max_append_tokens(seq) > 0)
        ASSERT_TRUE(WriteStep(*pool, {&seq}, {std::min<int64_t>(5, pool->max_append_tokens(seq))}, {7}).ok());
    }
    EXPECT_EQ(pool->max_append_tokens(seq), INT64_MAX) << "every group converted";
    EXPECT_EQ(pool->blocks_in_use(KvGroup::kFull, 0) + pool->blocks_in_use(KvGroup::kSliding, 0),
              (scheme.full.delayed() ? 0 : pool->blocks_held(seq, KvGroup::kFull)) +
                  (scheme.sliding.delayed() ? 0 : pool->blocks_held(seq, KvGroup::kSliding)));
    // Tokens written after the change are encoded directly.
    const int64_t at = seq.length();
    ASSERT_TRUE(WriteStep(*pool, {&seq}, {11}, {8}).ok());
    const auto all = pool->Export(seq);
    for (const KvPool::LayerRecords& rec : all) {
      const KvRecordFormat f = FormatOf(*pool, seq, rec.layer);
      const int64_t from = std::max(at, rec.first_token);
      const std::vector<uint8_t> tail = ExpectedRecords(f, 8, rec.layer, from, seq.length());
      ASSERT_GE(rec.records.size(), tail.size());
      EXPECT_TRUE(std::equal(tail.begin(), tail.end(), rec.records.end() - static_cast<long>(tail.size())))
          << "layer " << rec.layer;
    }
  }
}

}  // namespace
}  // namespace g4
