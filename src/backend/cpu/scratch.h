// Per-thread reusable float buffers, so hot ops never allocate after warm-up.
// Each caller uses its own slot; a buffer stays valid until the same thread
// asks for the same slot again.
#pragma once

#include <cstddef>
#include <vector>

namespace g4::cpu {

enum class ScratchSlot {
  kInput,
  kRowScales,
  kRowBiases,
  kTile,
  kAccumulators,
  kCount
};

inline float* ThreadScratch(ScratchSlot slot, size_t n) {
  thread_local std::vector<float> buffers[static_cast<int>(ScratchSlot::kCount)];
  std::vector<float>& b = buffers[static_cast<int>(slot)];
  if (b.size() < n) b.resize(n);
  return b.data();
}

}  // namespace g4::cpu
