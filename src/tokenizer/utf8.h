// UTF-8 helpers for the tokenizer. Validation is strict (no overlongs, no
// surrogates, nothing past U+10FFFF), matching what a Rust &str may hold, so
// text that HF could not have tokenized is rejected rather than guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace g4::utf8 {

inline constexpr size_t kValid = static_cast<size_t>(-1);
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Byte offset of the first byte that does not start a valid sequence, or
// kValid when all of `s` is valid UTF-8.
size_t FindInvalid(std::string_view s);

// Length of the sequence a lead byte announces (1..4), 0 for a byte that
// can never start a sequence (continuation bytes, C0, C1, F5..FF).
inline int SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// Whether `next` may follow the bytes `seq[0..len)` (len >= 1, a valid
// incomplete prefix) inside one sequence; encodes the second-byte limits
// that exclude overlongs, surrogates and code points past U+10FFFF.
inline bool ValidContinuation(const uint8_t* seq, size_t len, uint8_t next) {
  if (len == 1) {
    switch (seq[0]) {
      case 0xE0: return next >= 0xA0 && next <= 0xBF;
      case 0xED: return next >= 0x80 && next <= 0x9F;
      case 0xF0: return next >= 0x90 && next <= 0xBF;
      case 0xF4: return next >= 0x80 && next <= 0x8F;
      default: break;
    }
  }
  return (next & 0xC0) == 0x80;
}

// Decodes the valid sequence at `p` (of SequenceLength(p[0]) bytes).
inline uint32_t DecodeValid(const char* p, int len) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  switch (len) {
    case 1: return u[0];
    case 2: return ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu);
    case 3: return ((u[0] & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu);
    default: return ((u[0] & 0x07u) << 18) | ((u[1] & 0x3Fu) << 12) | ((u[2] & 0x3Fu) << 6) | (u[3] & 0x3Fu);
  }
}

// Start of the character that ends just before `end` in valid UTF-8 `s`.
inline size_t PreviousCharStart(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace g4::utf8
