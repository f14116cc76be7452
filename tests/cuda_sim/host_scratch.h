// Host memory for the CUDA entry points' scratch slots, as the emulator's
// kernels read host memory: kCounters zeros (as the backend keeps it), the
// other slots garbage. Test-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/launch.h"

namespace g4::cuda::sim {

class HostScratch final : public Scratch {
 public:
  void* Get(Slot slot, size_t bytes) override {
    std::vector<uint8_t>& b = slots_[slot];
    if (b.size() < bytes) b.assign(bytes, slot == kCounters ? 0 : 0xFF);
    return b.data();
  }

 private:
  std::vector<uint8_t> slots_[kNumSlots];
};

}  // namespace g4::cuda::sim
