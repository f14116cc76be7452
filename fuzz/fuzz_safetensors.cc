// libFuzzer target: SafetensorsFile::Parse must reject any byte string it
// cannot fully validate with a Status, never crash, and every tensor it
// accepts must lie inside the input (touching its first and last byte would
// trip AddressSanitizer otherwise).
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = g4::SafetensorsFile::Parse(data, size, "fuzz");
  if (!parsed.ok()) return 0;
  uint8_t acc = 0;
  for (const g4::TensorInfo& t : (*parsed)->tensors()) {
    if (t.nbytes == 0) continue;
    acc ^= t.data[0];
    acc ^= t.data[t.nbytes - 1];
    if (static_cast<size_t>(t.numel()) * g4::DTypeSize(t.dtype) != t.nbytes) __builtin_trap();
    if ((*parsed)->Find(t.name) != &t) __builtin_trap();
  }
  volatile uint8_t sink = acc;  // keeps the reads from being optimized away
  (void)sink;
  return 0;
}
