// Splitting a flat range over the OpenMP team for the streaming elementwise
// ops: contiguous, lane-aligned pieces, one per thread, and no team at all
// for short ranges.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/simd.h"

namespace g4::cpu {

constexpr int64_t kParallelMinElements = 1 << 16;

// Calls fn(begin, end) over pieces covering [0, n).
template <typename Fn>
void ParallelRange(int64_t n, Fn&& fn) {
  if (n < kParallelMinElements || omp_get_max_threads() == 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t piece = (n + nt - 1) / nt;
    piece = (piece + kLanes - 1) / kLanes * kLanes;
    const int64_t begin = std::min(n, t * piece), end = std::min(n, begin + piece);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace g4::cpu
