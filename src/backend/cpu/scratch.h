// Per-thread reusable float buffers, so hot ops never allocate after warm-up.
// Each caller uses its own slot; a buffer stays valid until the same thread
// asks for the same slot again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/isa.h"

G4_CPU_BEGIN

enum class ScratchSlot { kInput, kRowScales, kRowBiases, kTile, kAccumulators, kCount };

inline float* ThreadScratch(ScratchSlot slot, size_t n) {
  thread_local std::vector<float> buffers[static_cast<int>(ScratchSlot::kCount)];
  std::vector<float>& b = buffers[static_cast<int>(slot)];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// The same, the start rounded up to a cache line: a vector load that
// straddles two lines costs two.
inline float* AlignedThreadScratch(ScratchSlot slot, size_t n) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ThreadScratch(slot, n + 16));
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

G4_CPU_END
