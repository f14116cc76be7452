// Shadow of backend/cuda/cp_async.cuh for the SIMT emulator: a thread's
// copies land at once or when a wait covers their group (CpAsyncWait<N>:
// all but the newest N committed groups; copies not yet committed never
// land). Test-only.
#pragma once

#include <cuda_runtime.h>

#include <cstring>

namespace g4::cuda {

// A copy lands at once or at its wait, pseudo-randomly (the hardware may
// do either): a read before the wait, or a write into memory that another
// warp still reads, shows.
inline void SimCpAsync(void* dst, const void* src, size_t n) {
  simt::Fiber& f = simt::Me();
  f.rng = f.rng * 1664525u + 1013904223u;
  if ((f.rng >> 31) != 0) {
    std::memcpy(dst, src, n);
    return;
  }
  f.copies.push_back({dst, src, n});
}
inline void CpAsync16(void* dst, const void* src) { SimCpAsync(dst, src, 16); }
inline void CpAsync4(void* dst, const void* src) { SimCpAsync(dst, src, 4); }
inline void CpAsyncCommit() { simt::Me().groups.push_back(simt::Me().copies.size()); }
inline void PrefetchL2(const void*) {}  // a hint; the emulator has no caches
template <int N>
void CpAsyncWait() {
  simt::Fiber& f = simt::Me();
  const size_t keep_groups = static_cast<size_t>(N) < f.groups.size() ? N : f.groups.size();
  const size_t land = f.groups.size() - keep_groups;  // groups that land now
  const size_t n = land == 0 ? 0 : f.groups[land - 1];
  for (size_t i = 0; i < n; ++i) std::memcpy(f.copies[i].dst, f.copies[i].src, f.copies[i].n);
  f.copies.erase(f.copies.begin(), f.copies.begin() + static_cast<std::ptrdiff_t>(n));
  f.groups.erase(f.groups.begin(), f.groups.begin() + static_cast<std::ptrdiff_t>(land));
  for (size_t& g : f.groups) g -= n;
}

}  // namespace g4::cuda
