// Checksums for persisted caches: CRC32C (Castagnoli), with the SSE4.2
// instruction (the build's x86-64-v3 floor has it; a bitwise fallback keeps
// other targets correct), and 64-bit FNV-1a for model fingerprints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace g4 {

// CRC32C of data[0..n), continuing from `crc` (0 for a fresh checksum).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

struct Fnv1a64 {
  uint64_t h = 0xcbf29ce484222325ull;
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
  void Add(std::string_view s) {
    Add(s.data(), s.size());
    const uint8_t sep = 0xff;  // "ab"+"c" and "a"+"bc" differ
    Add(&sep, 1);
  }
};

}  // namespace g4
