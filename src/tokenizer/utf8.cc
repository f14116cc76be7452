#include "tokenizer/utf8.h"

#include <cstring>

namespace g4::utf8 {

size_t FindInvalid(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII runs dominate real text; skip them eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const uint8_t lead = p[i];
    const int len = SequenceLength(lead);
    if (len == 0) return i;
    if (len == 1) {
      ++i;
      continue;
    }
    if (i + len > n) return i;
    for (int k = 1; k < len; ++k)
      if (!ValidContinuation(p + i, k, p[i + k])) return i;
    i += len;
  }
  return kValid;
}

}  // namespace g4::utf8
