// AddedTokenMatcher: leftmost-longest matching, checked against a brute-force
// reference on random token sets and texts, and on the long-token inputs that
// made the old per-position trie walk O(text x token length).
#include "tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace g4 {
namespace {

using Match = AddedTokenMatcher::Match;

// HF's rule, spelled out: from `pos`, the earliest start with any match wins,
// the longest token there; resume after it.
std::vector<Match> Reference(const std::vector<std::pair<std::string, int32_t>>& tokens, std::string_view text) {
  std::vector<Match> out;
  size_t pos = 0;
  while (pos < text.size()) {
    Match best;
    for (size_t start = pos; start < text.size() && best.id < 0; ++start) {
      for (const auto& [t, id] : tokens) {
        if (t.empty() || text.compare(start, t.size(), t) != 0) continue;
        if (best.id < 0 || start + t.size() > best.end) best = {start, start + t.size(), id};
      }
    }
    if (best.id < 0) break;
    out.push_back(best);
    pos = best.end;
  }
  return out;
}

void ExpectSame(const std::vector<Match>& got, const std::vector<Match>& want, const std::string& context) {
  ASSERT_EQ(got.size(), want.size()) << context;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].begin, want[i].begin) << context << " #" << i;
    EXPECT_EQ(got[i].end, want[i].end) << context << " #" << i;
    EXPECT_EQ(got[i].id, want[i].id) << context << " #" << i;
  }
}

TEST(AddedTokens, MatchesReferenceOnRandomInputs) {
  std::mt19937 rng(11);
  auto random_string = [&](size_t max_len) {
    std::string s(1 + rng() % max_len, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % 3);  // small alphabet: many overlaps
    return s;
  };
  for (int round = 0; round < 300; ++round) {
    std::vector<std::pair<std::string, int32_t>> tokens;
    AddedTokenMatcher m;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      std::string t = random_string(5);
      bool dup = false;
      for (auto& [existing, id] : tokens) {
        if (existing == t) {  // a repeated content keeps the later id
          id = 100 + i;
          dup = true;
        }
      }
      if (!dup) tokens.emplace_back(t, 100 + i);
      m.Add(t, 100 + i);
    }
    m.Build();
    const std::string text = random_string(40);
    ExpectSame(m.FindAll(text), Reference(tokens, text), "round " + std::to_string(round) + " text " + text);
  }
}

TEST(AddedTokens, PrefersEarlierStartOverLaterLongerMatch) {
  AddedTokenMatcher m;
  m.Add("bc", 1);
  m.Add("abcd", 2);
  m.Add("ab", 3);
  m.Build();
  ExpectSame(m.FindAll("xabcdx"), {{1, 5, 2}}, "abcd");
  ExpectSame(m.FindAll("xabcx"), {{1, 3, 3}}, "ab then nothing");
  EXPECT_EQ(m.Lookup("abcd"), 2);
  EXPECT_EQ(m.Lookup("abc"), -1);
  EXPECT_EQ(m.Lookup(""), -1);
}

TEST(AddedTokens, FiftyThousandByteTokenIsLinear) {
  // The issue's case: one 50,001-byte token, 100 KB of text that keeps
  // matching its prefix. The old walk did ~10^9 steps (21 s); no timing is
  // asserted, but a regression shows as a test that takes minutes.
  const std::string token(50001, 'a');
  AddedTokenMatcher m;
  m.Add(token, 7);
  m.Build();
  const std::string text(100000, 'a');
  ExpectSame(m.FindAll(text), {{0, 50001, 7}}, "one match, then 49,999 unmatched bytes");

  // A short token that is a prefix of a long one that never completes.
  AddedTokenMatcher m2;
  m2.Add("a", 1);
  m2.Add(std::string(50000, 'a') + "b", 2);
  m2.Build();
  const std::vector<Match> all = m2.FindAll(text);
  ASSERT_EQ(all.size(), text.size());
  for (size_t i = 0; i < all.size(); i += 9973) ExpectSame({all[i]}, {{i, i + 1, 1}}, "single a");
}

}  // namespace
}  // namespace g4
