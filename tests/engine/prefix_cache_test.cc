// The prefix cache and its disk tier: a reused prefix gives bit-identical
// logits to a fresh run; sequences after one cached prefix hold it once;
// LRU eviction within the byte cap; prefixes the pool cannot cut (sliding
// window, delayed precision) are not offered; entries survive a restart on
// disk, and damaged or unfinished files are skipped, logged and removed.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/kv_disk_cache.h"
#include "engine_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

class KeepSink final : public SequenceSink {
 public:
  explicit KeepSink(int64_t vocab) : vocab_(vocab) {}
  void OnLogits(int64_t index, std::span<const float> l) override {
    if (static_cast<int64_t>(rows.size()) < (index + 1) * vocab_) rows.resize((index + 1) * vocab_);
    std::copy(l.begin(), l.end(), rows.begin() + index * vocab_);
  }
  void OnFinish(FinishReason, KvSeq s, const Status& st) override {
    seq = std::move(s);
    status = st;
  }
  std::vector<float> rows;
  KvSeq seq;
  Status status;

 private:
  int64_t vocab_;
};

class PrefixCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = MakeCpuBackend();
    auto m = Gemma4Model::Load(testing::TestDataPath("models/tiny-e"), *backend_);  // sliding window 8
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    engine_ = MakeEngine("plain");
  }
  std::unique_ptr<Engine> MakeEngine(const std::string& kv) {
    EngineOptions o;
    o.kv = kv;
    o.max_seqs = 4;
    o.max_step_tokens = 16;
    o.max_outputs = 16;
    o.kv_budget_bytes = size_t{8} << 20;
    o.block_size = 4;
    auto e = Engine::Create(*model_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }
  std::vector<int32_t> Tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = static_cast<int32_t>(rng() % model_->vocab_size());
    return ids;
  }
  // Runs `tokens` after what `seq` holds (prefill only), logits of every row.
  KeepSink Run(Engine& e, KvSeq seq, const std::vector<int32_t>& tokens) {
    KeepSink sink(model_->vocab_size());
    SequenceRequest r;
    r.seq = std::move(seq);
    r.prompt = tokens;
    r.logits_from = 0;
    r.sink = &sink;
    auto id = e.scheduler().Submit(std::move(r));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(e.scheduler().RunUntilIdle().ok());
    return sink;
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Gemma4Model> model_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PrefixCacheTest, AReusedPrefixGivesTheLogitsOfAFreshRun) {
  PrefixCacheOptions o;
  o.max_bytes = size_t{1} << 20;
  o.min_tokens = 1;
  PrefixCache cache(engine_->pool(), o);
  const std::vector<int32_t> first = Tokens(7, 1);
  KeepSink a = Run(*engine_, KvSeq(), first);
  ASSERT_TRUE(a.seq.valid());
  cache.Insert(a.seq, first);
  a.seq = KvSeq();

  // A prompt sharing 5 tokens, then its own.
  std::vector<int32_t> second(first.begin(), first.begin() + 5);
  for (int32_t t : Tokens(6, 2)) second.push_back(t);
  PrefixCache::Hit hit = cache.Lookup(second, static_cast<int64_t>(second.size()) - 1);
  ASSERT_EQ(hit.tokens, 5);
  KeepSink b = Run(*engine_, std::move(hit.seq), std::vector<int32_t>(second.begin() + 5, second.end()));
  auto fresh = testing::RunSolo(*model_, second, 16);
  ASSERT_TRUE(fresh.ok());
  const int64_t V = model_->vocab_size();
  ASSERT_EQ(b.rows.size(), 6u * V);
  EXPECT_EQ(0, std::memcmp(b.rows.data(), fresh->logits.data() + 5 * V, b.rows.size() * sizeof(float)))
      << "reused-prefix logits differ from a fresh run";
  const PrefixCacheStats s = cache.stats();
  EXPECT_EQ(s.lookups, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.reused_tokens, 5);
}

TEST_F(PrefixCacheTest, SequencesAfterOneCachedPrefixHoldItOnce) {
  PrefixCacheOptions o;
  o.max_bytes = size_t{1} << 20;
  o.min_tokens = 1;
  PrefixCache cache(engine_->pool(), o);
  KvPool& pool = engine_->pool();
  const std::vector<int32_t> prefix = Tokens(8, 3);  // two full blocks
  {
    KeepSink a = Run(*engine_, KvSeq(), prefix);
    cache.Insert(a.seq, prefix);
  }
  const int64_t base = pool.blocks_in_use(KvGroup::kFull, 0);
  EXPECT_EQ(base, 2);
  std::vector<KvSeq> kept;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = prefix;
    for (int32_t t : Tokens(3, 10 + i)) p.push_back(t);
    PrefixCache::Hit hit = cache.Lookup(p, static_cast<int64_t>(p.size()) - 1);
    ASSERT_EQ(hit.tokens, 8);
    KeepSink s = Run(*engine_, std::move(hit.seq), std::vector<int32_t>(p.begin() + 8, p.end()));
    kept.push_back(std::move(s.seq));
  }
  // The prefix's two blocks once, plus one block of its own per sequence.
  EXPECT_EQ(pool.blocks_in_use(KvGroup::kFull, 0), base + 4);
}

TEST_F(PrefixCacheTest, LeastRecentlyUsedGoFirstWithinTheByteCap) {
  PrefixCacheOptions o;
  o.min_tokens = 1;
  o.max_bytes = engine_->pool().ProjectedBytes(8) * 2 + engine_->pool().ProjectedBytes(8) / 2;  // room for two
  PrefixCache cache(engine_->pool(), o);
  std::vector<std::vector<int32_t>> prompts = {Tokens(8, 20), Tokens(8, 21), Tokens(8, 22)};
  for (int i = 0; i < 2; ++i) cache.Insert(Run(*engine_, KvSeq(), prompts[i]).seq, prompts[i]);
  // Use the first, so the second is the least recent.
  EXPECT_EQ(cache.Lookup(prompts[0], 7).tokens, 7);
  cache.Insert(Run(*engine_, KvSeq(), prompts[2]).seq, prompts[2]);
  EXPECT_EQ(cache.stats().entries, 2);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.Lookup(prompts[1], 7).tokens, 0);
  EXPECT_EQ(cache.Lookup(prompts[0], 7).tokens, 7);
  EXPECT_EQ(cache.Lookup(prompts[2], 7).tokens, 7);
  EXPECT_TRUE(cache.EvictOne());
  EXPECT_TRUE(cache.EvictOne());
  EXPECT_FALSE(cache.EvictOne());
  EXPECT_EQ(engine_->pool().used_bytes(), 0u);  // nothing else held blocks
}

TEST_F(PrefixCacheTest, PrefixesThePoolCannotCutAreNotOffered) {
  PrefixCacheOptions o;
  o.max_bytes = size_t{1} << 20;
  o.min_tokens = 1;
  PrefixCache cache(engine_->pool(), o);
  const std::vector<int32_t> longer = Tokens(40, 4);  // well past the sliding window of 8
  cache.Insert(Run(*engine_, KvSeq(), longer).seq, longer);
  std::vector<int32_t> early(longer.begin(), longer.begin() + 10);
  early.push_back(1);
  EXPECT_EQ(cache.Lookup(early, 10).tokens, 0);  // its sliding blocks for token 10 are gone
  std::vector<int32_t> late = longer;
  late.push_back(1);
  EXPECT_EQ(cache.Lookup(late, 40).tokens, 40);

  // Delayed precision (on a model whose window the prompt stays within): a
  // prefix shorter than the conversion point cannot resume exactly.
  auto dense = Gemma4Model::Load(testing::TestDataPath("models/tiny-dense"), *backend_);  // window 16
  ASSERT_TRUE(dense.ok());
  EngineOptions eo;
  eo.kv = "plain:bf16@12";
  eo.max_step_tokens = 16;
  eo.kv_budget_bytes = size_t{8} << 20;
  eo.block_size = 4;
  auto delayed = Engine::Create(**dense, eo);
  ASSERT_TRUE(delayed.ok());
  PrefixCache dc((*delayed)->pool(), o);
  const std::vector<int32_t> p = Tokens(14, 5);
  dc.Insert(Run(**delayed, KvSeq(), p).seq, p);
  std::vector<int32_t> q(p.begin(), p.begin() + 6);
  q.push_back(2);
  EXPECT_EQ(dc.Lookup(q, 6).tokens, 0);
  std::vector<int32_t> r(p.begin(), p.begin() + 13);
  r.push_back(2);
  EXPECT_EQ(dc.Lookup(r, 13).tokens, 13);
}

class DiskTierTest : public PrefixCacheTest {
 protected:
  KvDiskCacheOptions DiskOptions() {
    KvDiskCacheOptions d;
    d.dir = dir_;
    d.identity = {"fingerprint-1", "tok-1"};
    d.scheme = engine_->pool().scheme().signature();
    d.log = [this](const std::string& line) { log_ += line + "\n"; };
    return d;
  }
  std::string dir_ = testing::MakeTempDir() + "/kv";
  std::string log_;
};

TEST_F(DiskTierTest, EntriesSurviveARestartAndReuseStaysExact) {
  PrefixCacheOptions o;
  o.max_bytes = size_t{1} << 20;
  o.min_tokens = 1;
  const std::vector<int32_t> first = Tokens(12, 6);
  {
    auto disk = KvDiskCache::Open(DiskOptions());
    ASSERT_TRUE(disk.ok());
    PrefixCache cache(engine_->pool(), o, disk->get());
    cache.Insert(Run(*engine_, KvSeq(), first).seq, first);
    cache.Flush();
    EXPECT_EQ((*disk)->entries(), 1);
  }
  engine_ = MakeEngine("plain");  // a new pool: nothing in memory
  auto disk = KvDiskCache::Open(DiskOptions());
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ((*disk)->entries(), 1);
  PrefixCache cache(engine_->pool(), o, disk->get());
  std::vector<int32_t> second = first;
  for (int32_t t : Tokens(3, 7)) second.push_back(t);
  PrefixCache::Hit hit = cache.Lookup(second, static_cast<int64_t>(second.size()) - 1);
  ASSERT_EQ(hit.tokens, 12);
  EXPECT_EQ(cache.stats().disk_loads, 1);
  KeepSink b = Run(*engine_, std::move(hit.seq), std::vector<int32_t>(second.begin() + 12, second.end()));
  auto fresh = testing::RunSolo(*model_, second, 16);
  ASSERT_TRUE(fresh.ok());
  const int64_t V = model_->vocab_size();
  ASSERT_EQ(b.rows.size(), 3u * V);
  EXPECT_EQ(0, std::memcmp(b.rows.data(), fresh->logits.data() + 12 * V, b.rows.size() * sizeof(float)));
}

TEST_F(DiskTierTest, DamagedAndUnfinishedFilesAreSkippedLoggedAndRemoved) {
  PrefixCacheOptions o;
  o.max_bytes = size_t{1} << 20;
  o.min_tokens = 1;
  const std::vector<int32_t> a = Tokens(12, 8), b = Tokens(12, 9), c = Tokens(12, 10);
  std::string name_a, name_b, name_c;
  {
    auto disk = KvDiskCache::Open(DiskOptions());
    ASSERT_TRUE(disk.ok());
    PrefixCache cache(engine_->pool(), o, disk->get());
    for (const auto* p : {&a, &b, &c}) cache.Insert(Run(*engine_, KvSeq(), *p).seq, *p);
    cache.Flush();
    name_a = (*disk)->NameOf(a);
    name_b = (*disk)->NameOf(b);
    name_c = (*disk)->NameOf(c);
  }
  // a: a flipped byte in its KV records; b: a truncated index; c: intact.
  {
    std::fstream f(dir_ + "/" + name_a + ".g4kv", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 7);
    char x;
    f.read(&x, 1);
    x ^= 0x40;
    f.seekp(4096 + 7);
    f.write(&x, 1);
  }
  fs::resize_file(dir_ + "/" + name_b + ".idx", 10);
  // A write cut short (kill -9 mid-save) and an orphan KV file.
  std::ofstream(dir_ + "/" + name_c + ".g4kv.tmp.4242") << "partial";
  fs::copy_file(dir_ + "/" + name_c + ".g4kv", dir_ + "/0123456789abcdef.g4kv");

  engine_ = MakeEngine("plain");
  auto disk = KvDiskCache::Open(DiskOptions());
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ((*disk)->entries(), 2);  // a and c indexed; b's index is damaged
  EXPECT_NE(log_.find("skipped corrupt entry " + name_b), std::string::npos) << log_;
  EXPECT_NE(log_.find("unfinished write"), std::string::npos) << log_;
  EXPECT_NE(log_.find("orphan"), std::string::npos) << log_;
  EXPECT_FALSE(fs::exists(dir_ + "/0123456789abcdef.g4kv"));
  EXPECT_FALSE(fs::exists(dir_ + "/" + name_c + ".g4kv.tmp.4242"));

  PrefixCache cache(engine_->pool(), o, disk->get());
  std::vector<int32_t> qa = a;
  qa.push_back(3);
  EXPECT_EQ(cache.Lookup(qa, 12).tokens, 0);  // checksums caught it: not served
  EXPECT_NE(log_.find("skipped corrupt entry " + name_a), std::string::npos) << log_;
  EXPECT_FALSE(fs::exists(dir_ + "/" + name_a + ".g4kv"));
  EXPECT_EQ(cache.stats().disk_errors, 1);
  std::vector<int32_t> qc = c;
  qc.push_back(3);
  EXPECT_EQ(cache.Lookup(qc, 12).tokens, 12);
  EXPECT_EQ((*disk)->entries(), 1);
}

TEST_F(DiskTierTest, EntriesOfAnotherModelAreLeftAlone) {
  PrefixCacheOptions o;
  o.max_bytes = size_t{1} << 20;
  o.min_tokens = 1;
  const std::vector<int32_t> a = Tokens(12, 11);
  {
    auto disk = KvDiskCache::Open(DiskOptions());
    PrefixCache cache(engine_->pool(), o, disk->get());
    cache.Insert(Run(*engine_, KvSeq(), a).seq, a);
    cache.Flush();
  }
  KvDiskCacheOptions other = DiskOptions();
  other.identity.model_fingerprint = "fingerprint-2";
  auto disk = KvDiskCache::Open(other);
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ((*disk)->entries(), 0);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);  // still there
}

}  // namespace
}  // namespace g4
