// KvPool policies: where Fork/Trim may cut (minimum reusable offset,
// released sliding blocks), when delayed precision converts (today's rule,
// whatever the chunking), admission and reservations, ForBudget and
// ProjectedBytes.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_pool.h"
#include "kv_test_util.h"

namespace g4 {
namespace {

using testing::Append;
using testing::Capacity;
using testing::CeilDiv;
using testing::MakeConfig;
using testing::MakePool;
using testing::MustParseScheme;
using testing::SchedulerStep;
using testing::SynthConfig;

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

TEST(KvPoolCut, RefusesBelowTheMinimumReusableOffset) {
  auto backend = MakeCpuBackend();
  SynthConfig s;
  s.sliding_window = 64;  // keep the sliding blocks: only the precision change limits cuts here
  auto pool = MakePool(MakeConfig(s), "affine:8@20", *backend, Capacity(40));
  ASSERT_NE(pool, nullptr);
  KvSeq seq = pool->NewSequence();
  ASSERT_TRUE(Append(*pool, seq, 12).ok());
  EXPECT_EQ(pool->max_append_tokens(seq), 8);
  ASSERT_TRUE(Append(*pool, seq, 8).ok());
  EXPECT_EQ(pool->minimum_reusable_offset(seq), 0);
  EXPECT_TRUE(pool->CanCut(seq, 3));  // not converted yet: any prefix
  ASSERT_TRUE(pool->Maintain(seq).ok());
  EXPECT_EQ(pool->minimum_reusable_offset(seq), 20);
  ASSERT_TRUE(Append(*pool, seq, 5).ok());
  for (int64_t n = 0; n <= 25; ++n) EXPECT_EQ(pool->CanCut(seq, n), n >= 20) << n;
  const size_t used = pool->used_bytes();
  auto fork = pool->Fork(seq, 19);
  ASSERT_FALSE(fork.ok());
  EXPECT_EQ(fork.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fork.status().message().find("minimum reusable offset"), std::string::npos) << fork.status().message();
  Status trim = pool->Trim(seq, 19);
  EXPECT_FALSE(trim.ok());
  EXPECT_EQ(seq.length(), 25);
  EXPECT_EQ(pool->used_bytes(), used);
  EXPECT_FALSE(pool->Trim(seq, 26).ok());  // past the end
  EXPECT_FALSE(pool->CanCut(seq, -1));
  // At or past the offset both work, and carry it.
  auto child = pool->Fork(seq, 20);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ(pool->converted_at(*child, KvGroup::kFull), 20);
  EXPECT_EQ(pool->minimum_reusable_offset(*child), 20);
  ASSERT_TRUE(pool->Trim(seq, 22).ok());
  EXPECT_EQ(seq.length(), 22);
  EXPECT_EQ(pool->blocks_held(seq, KvGroup::kFull), 2);
}

TEST(KvPoolCut, RefusesPastReleasedSlidingBlocks) {
  auto backend = MakeCpuBackend();
  std::mt19937 rng(3);
  for (const auto& [window, bs] : {std::pair{8, 4}, std::pair{8, 16}, std::pair{13, 5}}) {
    SynthConfig s;
    s.sliding_window = window;
    auto pool = MakePool(MakeConfig(s), "plain", *backend, Capacity(100, bs));
    ASSERT_NE(pool, nullptr);
    KvSeq seq = pool->NewSequence();
    while (seq.length() < 90) ASSERT_TRUE(Append(*pool, seq, 1 + static_cast<int64_t>(rng() % 11)).ok());
    const int64_t length = seq.length();
    // Independent rule: block b is still held iff its last token is one the
    // next query at `length` sees (> length - window).
    auto present = [&, bs = bs, window = window](int64_t b) { return (b + 1) * bs - 1 > length - window; };
    int refused = 0;
    for (int64_t n = 0; n <= length; ++n) {
      bool ok = true;
      for (int64_t p = std::max<int64_t>(0, n - window + 1); p < n; ++p) ok &= present(p / bs);
      EXPECT_EQ(pool->CanCut(seq, n), ok) << "window " << window << " block " << bs << " cut at " << n;
      auto fork = pool->Fork(seq, n);
      EXPECT_EQ(fork.ok(), ok);
      if (!fork.ok()) {
        ++refused;
        EXPECT_NE(fork.status().message().find("released"), std::string::npos) << fork.status().message();
      } else if (n > 0) {
        // The child holds exactly its window (plus alignment) and can step on.
        EXPECT_LE(pool->blocks_held(*fork, KvGroup::kSliding), CeilDiv(window, bs) + 1);
        ASSERT_TRUE(Append(*pool, *fork, 3).ok());
      }
    }
    EXPECT_GT(refused, 50);
    KvSeq copy = std::move(pool->Fork(seq, length).value());
    EXPECT_FALSE(pool->Trim(copy, length - window - bs).ok());
    EXPECT_EQ(copy.length(), length);
  }
}

// The rule of today's delayed caches: a sequence converts once it holds N
// tokens, at the step after; a scheduler cuts chunks at N, so the change
// lands at N exactly unless the first chunk already passed it.
TEST(KvPoolDelayed, ConvertsAtTheSameTokenWhateverTheChunking) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  std::mt19937 rng(17);
  for (int64_t delay : {0, 1, 7, 16, 33}) {
    for (int trial = 0; trial < 12; ++trial) {
      SCOPED_TRACE("delay " + std::to_string(delay) + " trial " + std::to_string(trial));
      auto pool = MakePool(config, "turbo:k4v3@" + std::to_string(delay), *backend, Capacity(60));
      ASSERT_NE(pool, nullptr);
      KvSeq seq = pool->NewSequence();
      // The change lands at exactly `delay` tokens: even an empty sequence's
      // first chunk is cut there.
      EXPECT_EQ(pool->max_append_tokens(seq), delay);
      const int64_t expected = delay;
      int64_t want = 1 + static_cast<int64_t>(rng() % 40);
      while (seq.length() < 120) {
        const int64_t before = seq.length();
        if (before < delay) {
          EXPECT_EQ(pool->max_append_tokens(seq), delay - before);
        }
        if (before >= delay && pool->converted_at(seq, KvGroup::kFull) < 0) {
          EXPECT_EQ(pool->max_append_tokens(seq), 0) << "due";
        }
        auto n = SchedulerStep(*pool, seq, want);
        ASSERT_TRUE(n.ok()) << n.status().ToString();
        const int64_t at = pool->converted_at(seq, KvGroup::kFull);
        if (before < expected) {
          EXPECT_EQ(at, -1) << "converted early, before a step at " << before;
        } else {
          EXPECT_EQ(at, expected);
        }
        want = 1 + static_cast<int64_t>(rng() % 40);
      }
      EXPECT_EQ(pool->converted_at(seq, KvGroup::kFull), expected);
      EXPECT_EQ(pool->converted_at(seq, KvGroup::kSliding), -1);  // turbo: sliding layers stay plain
      EXPECT_EQ(pool->minimum_reusable_offset(seq), expected);
      EXPECT_EQ(pool->max_append_tokens(seq), kNoLimit);
      EXPECT_EQ(pool->blocks_in_use(KvGroup::kFull, 0), 0) << "the plain blocks were released";
      EXPECT_EQ(pool->blocks_in_use(KvGroup::kFull, 1), pool->blocks_held(seq, KvGroup::kFull));
    }
  }
}

TEST(KvPoolDelayed, GroupsConvertAtTheirOwnBoundaries) {
  auto backend = MakeCpuBackend();
  auto pool = MakePool(MakeConfig(), "full=affine:8@10,sliding=affine:4:32@25", *backend, Capacity(40));
  ASSERT_NE(pool, nullptr);
  KvSeq seq = pool->NewSequence();
  std::vector<int64_t> steps;
  while (seq.length() < 40) steps.push_back(*SchedulerStep(*pool, seq, 6));
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 4, 6, 6, 3, 6, 6, 6}));
  EXPECT_EQ(pool->converted_at(seq, KvGroup::kFull), 10);
  EXPECT_EQ(pool->converted_at(seq, KvGroup::kSliding), 25);
  EXPECT_EQ(pool->minimum_reusable_offset(seq), 25);
}

TEST(KvPoolDelayed, AFullTargetStoreRefusesAndChangesNothing) {
  auto backend = MakeCpuBackend();
  KvPoolOptions options = Capacity(20);
  options.capacity_blocks[0][1] = 1;  // the full group's affine store holds one block
  SynthConfig wide;
  wide.sliding_window = 64;  // so the trim below keeps its window
  auto pool = MakePool(MakeConfig(wide), "affine:8@16", *backend, options);
  ASSERT_NE(pool, nullptr);
  KvSeq seq = pool->NewSequence();
  ASSERT_TRUE(Append(*pool, seq, 40).ok());
  const size_t used = pool->used_bytes();
  const Status s = pool->Maintain(seq);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->converted_at(seq, KvGroup::kFull), -1);
  EXPECT_EQ(pool->converted_at(seq, KvGroup::kSliding), -1) << "all groups or none";
  EXPECT_EQ(pool->used_bytes(), used);
  EXPECT_EQ(pool->max_append_tokens(seq), 0);
  ASSERT_TRUE(pool->Trim(seq, 16).ok());
  ASSERT_TRUE(pool->Maintain(seq).ok());  // one block now
  EXPECT_EQ(pool->converted_at(seq, KvGroup::kFull), 16);
}

TEST(KvPoolAdmission, CouldEverFitAndCanAdmitFollowTheWorstCase) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();  // window 8
  KvPoolOptions options = Capacity(10);      // 16-token blocks
  options.capacity_blocks[1][0] = 5;
  auto pool = MakePool(config, "plain", *backend, options);
  ASSERT_NE(pool, nullptr);
  // Full store: ceil(N / 16) <= 10. Sliding: min(ceil(N / 16), ceil((8 + chunk) / 16) + 1) <= 5.
  EXPECT_TRUE(pool->CouldEverFit(160, 16));
  EXPECT_FALSE(pool->CouldEverFit(161, 16));
  EXPECT_TRUE(pool->CouldEverFit(160, 56));   // sliding: ceil(64 / 16) + 1 = 5
  EXPECT_FALSE(pool->CouldEverFit(160, 57));  // 6
  EXPECT_TRUE(pool->CouldEverFit(80, 1000));  // sliding: ceil(80 / 16) = 5
  EXPECT_TRUE(pool->CanAdmit(0, 1));
  KvSeq a = pool->NewSequence();
  ASSERT_TRUE(pool->Reserve(a, 96, 8).ok());  // 6 full, 2 sliding
  EXPECT_TRUE(pool->CanAdmit(64, 8));
  EXPECT_FALSE(pool->CanAdmit(65, 8));   // 5 full blocks, 4 unreserved
  EXPECT_FALSE(pool->CanAdmit(64, 40));  // 4 sliding blocks, 3 unreserved
  KvSeq b = pool->NewSequence();
  const Status refused = pool->Reserve(b, 80, 8);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_TRUE(pool->CanAdmit(64, 8)) << "a refused reservation reserves nothing";
  // An unreserved sequence cannot take reserved blocks: 4 full blocks are free to it.
  Status grow;
  while ((grow = testing::Append(*pool, b, 8)).ok()) {
  }
  EXPECT_EQ(grow.code(), StatusCode::kResourceExhausted) << grow.ToString();
  EXPECT_EQ(b.length(), 64);
  EXPECT_FALSE(pool->CanAdmit(1, 1));
  // `a` still gets all six.
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(testing::Append(*pool, a, 8).ok()) << "step " << i;
  a = KvSeq();  // releasing a sequence releases its blocks and reservation
  b = KvSeq();
  EXPECT_TRUE(pool->CanAdmit(160, 8));
  EXPECT_EQ(pool->used_bytes(), 0u);
}

// Reserved sequences step to their lengths while a greedy unreserved one
// takes every block it can: every reserved step succeeds.
TEST(KvPoolAdmission, ReserveGuaranteesLaterAppends) {
  auto backend = MakeCpuBackend();
  std::mt19937 rng(23);
  for (const char* spec : {"plain", "full=affine:8@24,sliding=turbo:k8v3@10"}) {
    SCOPED_TRACE(spec);
    for (int trial = 0; trial < 6; ++trial) {
      auto pool = MakePool(MakeConfig(), spec, *backend, Capacity(60, 8));
      ASSERT_NE(pool, nullptr);
      const int64_t max_chunk = 1 + static_cast<int64_t>(rng() % 20);
      std::vector<KvSeq> seqs;
      std::vector<int64_t> target;
      while (true) {
        const int64_t tokens = 20 + static_cast<int64_t>(rng() % 150);
        KvSeq s = pool->NewSequence();
        const bool admit = pool->CanAdmit(tokens, max_chunk);
        const Status r = pool->Reserve(s, tokens, max_chunk);
        ASSERT_EQ(r.ok(), admit) << r.ToString();
        if (!r.ok()) break;
        seqs.push_back(std::move(s));
        target.push_back(tokens);
      }
      ASSERT_GE(seqs.size(), 2u);
      KvSeq hog = pool->NewSequence();
      bool hog_refused = false;
      for (bool progress = true; progress;) {
        progress = !hog_refused;  // go on until the hog has hit the reservations
        // The hog grabs what it can, a few tokens at a time.
        const size_t used = pool->used_bytes();
        const int64_t hog_length = hog.length();
        const int64_t bite = 1 + static_cast<int64_t>(rng() % 9);
        const Status h = pool->PrepareAppend(hog, bite);
        if (h.ok()) {
          pool->Commit(hog, bite);
        } else {
          hog_refused = true;
          EXPECT_EQ(h.code(), StatusCode::kResourceExhausted);
          EXPECT_EQ(pool->used_bytes(), used);
          EXPECT_EQ(hog.length(), hog_length);
        }
        for (size_t i = 0; i < seqs.size(); ++i) {
          const int64_t left = target[i] - seqs[i].length();
          if (left <= 0 || rng() % 2) {
            progress |= left > 0;
            continue;
          }
          auto n = SchedulerStep(*pool, seqs[i], std::min(left, 1 + static_cast<int64_t>(rng() % max_chunk)));
          ASSERT_TRUE(n.ok()) << "reserved sequence " << i << " at " << seqs[i].length() << ": "
                              << n.status().ToString();
          progress = true;
        }
      }
      EXPECT_TRUE(hog_refused) << "the hog never ran out: the test proves nothing";
      for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i].length(), target[i]);
    }
  }
}

TEST(KvPoolBudget, ForBudgetSizesRingsAndPlainPhasesPerSequenceAndSharesTheRest) {
  auto backend = MakeCpuBackend();
  const Gemma4Config config = MakeConfig();
  for (const char* spec : {"plain", "affine:4@64", "turbo"}) {
    SCOPED_TRACE(spec);
    const KvScheme scheme = MustParseScheme(spec);
    const size_t budget = 4 << 20;
    const int max_seqs = 4;
    const int64_t chunk = 32;
    auto options = KvPoolOptions::ForBudget(config, scheme, budget, max_seqs, chunk, 16);
    ASSERT_TRUE(options.ok()) << options.status().ToString();
    auto pool = MakePool(config, spec, *backend, *options);
    ASSERT_NE(pool, nullptr);
    EXPECT_LE(pool->capacity_bytes(), budget);
    // Rings: window + chunk + one block per sequence.
    EXPECT_EQ(pool->capacity_blocks(KvGroup::kSliding, pool->block_bytes(KvGroup::kSliding, 1) ? 1 : 0),
              max_seqs * (CeilDiv(8 + chunk, 16) + 1));
    // The full-length store takes (almost) all the rest.
    const int full_store = pool->block_bytes(KvGroup::kFull, 1) ? 1 : 0;
    EXPECT_GT(pool->capacity_bytes() + pool->block_bytes(KvGroup::kFull, full_store) * 2, budget - budget / 50);
    // max_seqs sequences sharing the full store evenly are admitted at once.
    const int64_t each = pool->capacity_blocks(KvGroup::kFull, full_store) / max_seqs * 16;
    std::vector<KvSeq> seqs;
    for (int i = 0; i < max_seqs; ++i) {
      seqs.push_back(pool->NewSequence());
      EXPECT_TRUE(pool->Reserve(seqs.back(), each, chunk).ok()) << i;
    }
  }
  auto small = KvPoolOptions::ForBudget(config, MustParseScheme("plain"), 10000, 8, 64);
  EXPECT_EQ(small.status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(KvPoolOptions::ForBudget(config, MustParseScheme("plain"), 1 << 20, 0, 64).ok());
}

TEST(KvPoolBudget, ProjectedBytesMatchASoloRun) {
  auto backend = MakeCpuBackend();
  std::mt19937 rng(31);
  for (const char* spec : {"plain", "plain:bf16", "affine:8@20", "full=turbo@30,sliding=affine:4:32"}) {
    for (int64_t tokens : {1, 7, 16, 20, 21, 64, 100, 333}) {
      auto pool = MakePool(MakeConfig(), spec, *backend, Capacity(64, 16));
      ASSERT_NE(pool, nullptr);
      KvSeq seq = pool->NewSequence();
      // Chunks sized by the scheduler rule; the first one stops short of the
      // end so a due conversion has a step to happen before.
      int64_t want = std::max<int64_t>(1, std::min<int64_t>(tokens - 1, 1 + rng() % 30));
      while (seq.length() < tokens) {
        ASSERT_TRUE(SchedulerStep(*pool, seq, std::min(want, tokens - seq.length())).ok());
        want = 1 + static_cast<int64_t>(rng() % 30);
      }
      EXPECT_EQ(pool->used_bytes(), pool->ProjectedBytes(tokens)) << spec << " at " << tokens;
    }
  }
}

}  // namespace
}  // namespace g4
