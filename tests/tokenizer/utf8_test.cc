// utf8::FindInvalid against an independent validator: nlohmann::json's
// dump() refuses invalid UTF-8 (type_error 316).
#include "tokenizer/utf8.h"

#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace g4 {
namespace {

bool NlohmannAccepts(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

TEST(Utf8, AgreesWithNlohmannOnAllShortSequences) {
  // Every 1- and 2-byte string, and 3/4-byte strings over bytes at the
  // edges of the UTF-8 ranges.
  const std::vector<uint8_t> edges = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                      0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  int checked = 0;
  for (int a = 0; a < 256; ++a) {
    for (int b = -1; b < 256; ++b) {
      std::string s(1, static_cast<char>(a));
      if (b >= 0) s.push_back(static_cast<char>(b));
      ASSERT_EQ(utf8::FindInvalid(s) == utf8::kValid, NlohmannAccepts(s)) << a << " " << b;
      ++checked;
    }
  }
  for (uint8_t a : edges)
    for (uint8_t b : edges)
      for (uint8_t c : edges)
        for (int d = -1; d < static_cast<int>(edges.size()); ++d) {
          std::string s = {static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)};
          if (d >= 0) s.push_back(static_cast<char>(edges[d]));
          ASSERT_EQ(utf8::FindInvalid(s) == utf8::kValid, NlohmannAccepts(s)) << ::testing::PrintToString(s);
          ++checked;
        }
  EXPECT_GT(checked, 300000);
}

TEST(Utf8, OffsetPointsAtTheBadSequence) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    // Valid ASCII/multi-byte text, then one bad byte, then anything.
    std::string s;
    const int n = rng() % 40;
    for (int i = 0; i < n; ++i) s += (rng() % 2) ? "x" : "\xC3\xA9";
    const size_t bad_at = s.size();
    s.push_back(static_cast<char>(0x80 + rng() % 0x40));
    s += "tail";
    EXPECT_EQ(utf8::FindInvalid(s), bad_at);
  }
}

}  // namespace
}  // namespace g4
