// Parallel loops over the backend's worker team (thread_pool.h), for the
// kernels. Which member computes what never changes a result: every kernel
// fixes its arithmetic per output element (kernels.h), so these only decide
// who does the work.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cpu/simd.h"
#include "backend/cpu/thread_pool.h"

G4_CPU_BEGIN

// Streaming elementwise ops below this many elements run on one thread.
constexpr int64_t kParallelMinElements = 1 << 16;

// Calls fn(begin, end) over contiguous pieces covering [0, n), at most one
// per member and each (but the last) a multiple of `align` long, using as
// many members as leaves every piece at least `min_piece` long (one: the
// calling thread alone, no team).
template <typename Fn>
void ParallelFor(int64_t n, int64_t min_piece, Fn&& fn, int64_t align = 1) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_piece));
  const int members = static_cast<int>(std::min<int64_t>(TeamSize(), by_size));
  if (members <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  RunTeam(members, [&](int t, int nt) {
    int64_t piece = (n + nt - 1) / nt;
    piece = (piece + align - 1) / align * align;
    const int64_t begin = std::min(n, t * piece), end = std::min(n, begin + piece);
    if (begin < end) fn(begin, end);
  });
}

// Calls fn(i) for every i in [0, n), items handed out one at a time to
// whichever member is free (for items of uneven cost), on at most
// max_members members.
template <typename Fn>
void ParallelForDynamic(int64_t n, int max_members, Fn&& fn) {
  if (n <= 0) return;
  const int members = static_cast<int>(std::min<int64_t>({TeamSize(), n, max_members}));
  if (members <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  alignas(64) std::atomic<int64_t> next{0};
  RunTeam(members, [&](int, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i);
  });
}

// Rows of `cols` elements per piece for row-parallel streaming loops.
inline int64_t MinRowsPerPiece(int64_t cols) {
  return std::max<int64_t>(1, kParallelMinElements / 8 / std::max<int64_t>(1, cols));
}

// Calls fn(begin, end) over pieces covering [0, n): contiguous, lane-aligned,
// one per member, and no team at all for short ranges.
template <typename Fn>
void ParallelRange(int64_t n, Fn&& fn) {
  ParallelFor(n, kParallelMinElements / 8, fn, kLanes);
}

G4_CPU_END
