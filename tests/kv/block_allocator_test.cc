// BlockAllocator against a plain model of its bookkeeping: free list and
// reference counts, and the reservation guarantee (an account can always
// allocate its unused reservation, whatever the others do, sharing included).
#include "kv/block_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace g4 {
namespace {

TEST(BlockAllocator, HandsOutEachBlockOnceAndNeverBlockZero) {
  std::mt19937 rng(11);
  for (int64_t capacity : {0, 1, 7, 64}) {
    BlockAllocator a(capacity);
    EXPECT_EQ(a.free_blocks(), capacity);
    std::map<int32_t, int> refs;  // model: block -> references
    for (int it = 0; it < 2000; ++it) {
      const int op = static_cast<int>(rng() % 3);
      if (op == 0 && a.CanAllocate(0, 1)) {
        const int32_t b = a.Allocate(0);
        ASSERT_GE(b, 1);
        ASSERT_LE(b, capacity);
        ASSERT_EQ(refs.count(b), 0u) << "block " << b << " handed out twice";
        refs[b] = 1;
      } else if (op == 1 && !refs.empty()) {
        auto it2 = std::next(refs.begin(), static_cast<long>(rng() % refs.size()));
        a.AddRef(it2->first);
        ++it2->second;
      } else if (!refs.empty()) {
        auto it2 = std::next(refs.begin(), static_cast<long>(rng() % refs.size()));
        a.Release(0, it2->first);
        if (--it2->second == 0) refs.erase(it2);
      }
      ASSERT_EQ(a.in_use(), static_cast<int64_t>(refs.size()));
      ASSERT_EQ(a.free_blocks() + a.in_use(), capacity);
      for (const auto& [b, r] : refs) ASSERT_EQ(a.refcount(b), r);
      ASSERT_EQ(a.CanAllocate(0, 1), a.free_blocks() > 0);
    }
  }
}

// Accounts reserve, allocate, share and release at random. The model keeps
// what each account holds; the allocator must keep every account's unused
// reservation allocatable and refuse reservations only when they cannot fit.
TEST(BlockAllocator, ReservationsStayAllocatableUnderRandomUse) {
  std::mt19937 rng(5);
  constexpr int kAccounts = 5;
  constexpr int64_t kCapacity = 40;
  for (int round = 0; round < 20; ++round) {
    BlockAllocator a(kCapacity);
    std::vector<std::vector<int32_t>> held(kAccounts);  // references each account holds
    std::vector<int64_t> reserved(kAccounts, 0);
    std::vector<bool> shared(kAccounts, false);  // gave or took a shared block since opening
    std::map<int32_t, int> refs;
    auto pick = [&](std::vector<int32_t>& v) -> size_t { return static_cast<size_t>(rng() % v.size()); };
    for (int it = 0; it < 3000; ++it) {
      const int acc = static_cast<int>(rng() % kAccounts);
      const int op = static_cast<int>(rng() % 10);
      if (op < 4) {
        if (a.CanAllocate(acc, 1)) {
          const int32_t b = a.Allocate(acc);
          held[acc].push_back(b);
          refs[b] = 1;
        } else {
          ASSERT_EQ(a.unreserved_free(), 0) << "refused with unreserved blocks free";
        }
      } else if (op < 7) {
        if (held[acc].empty()) continue;
        const size_t i = pick(held[acc]);
        const int32_t b = held[acc][i];
        held[acc].erase(held[acc].begin() + static_cast<long>(i));
        a.Release(acc, b);
        if (--refs[b] == 0) refs.erase(b);
      } else if (op < 8) {
        // Share one of our blocks with another account (a fork).
        if (held[acc].empty()) continue;
        const int32_t b = held[acc][pick(held[acc])];
        const int other = static_cast<int>(rng() % kAccounts);
        shared[acc] = shared[other] = true;
        a.AddRef(b);
        held[other].push_back(b);
        ++refs[b];
      } else if (op < 9) {
        const int64_t want = static_cast<int64_t>(rng() % 16);
        const int64_t before = a.reserved();
        if (a.SetReservation(acc, want)) {
          reserved[acc] = want;
        } else {
          EXPECT_EQ(a.reserved(), before) << "a refused reservation changed the pool";
          EXPECT_GT(want, a.reservation(acc));
        }
        EXPECT_EQ(a.reservation(acc), reserved[acc]);
      } else {
        for (int32_t b : held[acc]) {
          a.Release(acc, b);
          if (--refs[b] == 0) refs.erase(b);
        }
        held[acc].clear();
        a.CloseAccount(acc);
        reserved[acc] = 0;
        shared[acc] = false;
        EXPECT_EQ(a.reservation(acc), 0);
      }
      // Invariants.
      ASSERT_EQ(a.in_use(), static_cast<int64_t>(refs.size()));
      ASSERT_GE(a.unreserved_free(), 0) << "more reserved than free";
      for (int x = 0; x < kAccounts; ++x) {
        // An account that never shared is charged exactly what it holds, so
        // the rest of its reservation is guaranteed.
        const int64_t room = std::max<int64_t>(0, reserved[x] - static_cast<int64_t>(held[x].size()));
        if (!shared[x]) {
          ASSERT_TRUE(a.CanAllocate(x, room)) << "account " << x << " lost its reservation";
        }
      }
    }
    for (int x = 0; x < kAccounts; ++x) {
      for (int32_t b : held[x]) a.Release(x, b);
      a.CloseAccount(x);
    }
    EXPECT_EQ(a.free_blocks(), kCapacity);
    EXPECT_EQ(a.reserved(), 0);
  }
}

TEST(BlockAllocator, AllocationsBeyondAReservationUseOnlyUnreservedBlocks) {
  BlockAllocator a(10);
  ASSERT_TRUE(a.SetReservation(1, 6));
  EXPECT_EQ(a.unreserved_free(), 4);
  EXPECT_FALSE(a.SetReservation(2, 5));  // only 4 unreserved
  EXPECT_TRUE(a.CanAllocate(2, 4));
  EXPECT_FALSE(a.CanAllocate(2, 5));
  std::vector<int32_t> mine, other;
  for (int i = 0; i < 4; ++i) other.push_back(a.Allocate(2));
  EXPECT_FALSE(a.CanAllocate(2, 1));  // the rest is account 1's
  EXPECT_TRUE(a.CanAllocate(1, 6));
  EXPECT_FALSE(a.CanAllocate(1, 7));
  for (int i = 0; i < 6; ++i) mine.push_back(a.Allocate(1));
  EXPECT_EQ(a.free_blocks(), 0);
  EXPECT_EQ(a.reserved(), 0);
  // Account 1 gives a block back: its reservation keeps it for account 1.
  a.Release(1, mine.back());
  EXPECT_EQ(a.free_blocks(), 1);
  EXPECT_FALSE(a.CanAllocate(2, 1));
  EXPECT_TRUE(a.CanAllocate(1, 1));
  // Account 2's freed blocks are nobody's.
  a.Release(2, other.back());
  EXPECT_TRUE(a.CanAllocate(2, 1));
  EXPECT_FALSE(a.CanAllocate(2, 2));
  // Shared blocks: account 1 shares one with account 3 and drops its
  // reference. The block lives on; its charge leaves account 1 only because
  // an unreserved block can cover the reservation it gives back.
  a.AddRef(mine.front());
  a.Release(1, mine.front());
  EXPECT_EQ(a.free_blocks(), 2);
  EXPECT_EQ(a.reserved(), 2);
  EXPECT_FALSE(a.CanAllocate(2, 1));
  EXPECT_TRUE(a.CanAllocate(1, 2));
  a.Release(3, mine.front());  // freed: nobody's charge any more
  EXPECT_EQ(a.free_blocks(), 3);
  EXPECT_EQ(a.unreserved_free(), 1);
  a.CloseAccount(1);
  EXPECT_EQ(a.reserved(), 0);
}

}  // namespace
}  // namespace g4
