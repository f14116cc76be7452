// StopMatcher tests: the reference answer for a text is computed here by
// brute force over the whole text; the matcher sees it in random pieces.
#include "engine/stop_matcher.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace g4 {
namespace {

// What must be emitted for `text` (and whether a stop string ends it): the
// text before the stop string completed first (earliest end, then longest).
std::pair<std::string, bool> Reference(const std::string& text, const std::vector<std::string>& stops) {
  size_t best_end = std::string::npos, best_pos = 0;
  for (const std::string& s : stops) {
    if (s.empty()) continue;
    const size_t pos = text.find(s);
    if (pos == std::string::npos) continue;
    if (pos + s.size() < best_end || (pos + s.size() == best_end && pos < best_pos)) {
      best_end = pos + s.size();
      best_pos = pos;
    }
  }
  if (best_end == std::string::npos) return {text, false};
  return {text.substr(0, best_pos), true};
}

// Feeds `text` split at random points; returns the concatenated emission.
std::string FeedInPieces(StopMatcher& m, const std::string& text, std::mt19937& rng, bool* stopped,
                std::vector<std::string>* pieces_out = nullptr) {
  std::string emitted;
  size_t pos = 0;
  while (pos < text.size() && !m.stopped()) {
    const size_t len = std::min<size_t>(1 + rng() % 6, text.size() - pos);
    StopMatcher::Step step = m.Feed(1000, text.substr(pos, len));
    emitted += step.text;
    if (pieces_out) pieces_out->push_back(step.text);
    pos += len;
  }
  *stopped = m.stopped();
  emitted += m.Flush();
  return emitted;
}

TEST(StopMatcherTest, RandomSplitsEmitExactlyTheTextBeforeTheStop) {
  std::mt19937 rng(2024);
  const std::vector<std::vector<std::string>> stop_sets = {
      {"abca"}, {"cc", "bab"}, {"aaa", "ab"}, {"bc", "abc"}, {"abcabc", "cab", "b c"}, {}};
  for (const auto& stops : stop_sets) {
    for (int trial = 0; trial < 3000; ++trial) {
      std::string text;
      const int len = rng() % 40;
      for (int i = 0; i < len; ++i) text += "abc "[rng() % 4];
      StopMatcher m({}, stops);
      bool stopped = false;
      const std::string emitted = FeedInPieces(m, text, rng, &stopped);
      const auto [want, want_stop] = Reference(text, stops);
      ASSERT_EQ(emitted, want) << "text \"" << text << "\"";
      ASSERT_EQ(stopped, want_stop) << "text \"" << text << "\"";
      // No emitted prefix of the output ever contains a stop string.
      for (const std::string& s : stops) ASSERT_EQ(emitted.find(s), std::string::npos);
    }
  }
}

TEST(StopMatcherTest, HoldsBackOnlyPossiblePrefixes) {
  StopMatcher m({}, {"</stop>"});
  EXPECT_EQ(m.Feed(1, "Hello </").text, "Hello ");
  EXPECT_EQ(m.Feed(2, "b>").text, "</b>");  // no longer a prefix: released
  StopMatcher::Step s = m.Feed(3, " x</st");
  EXPECT_EQ(s.text, " x");
  s = m.Feed(4, "op> tail");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(s.stop_string, "</stop>");
  EXPECT_TRUE(m.Feed(5, "more").stopped);
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, StopIdReleasesHeldTextAndSwallowsItsOwn) {
  StopMatcher m({1, 106}, {"STOP"});
  EXPECT_EQ(m.Feed(7, "abc ST").text, "abc ");
  StopMatcher::Step s = m.Feed(106, "<turn|>");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_id, 106);
  EXPECT_EQ(s.text, "ST");  // never became "STOP": it was output
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, IncompleteUtf8IsHeldUntilComplete) {
  StopMatcher m({}, {});
  const std::string euro = "\xE2\x82\xAC";  // U+20AC in three bytes
  EXPECT_EQ(m.Feed(1, "a" + euro.substr(0, 1)).text, "a");
  EXPECT_EQ(m.Feed(2, euro.substr(1, 1)).text, "");
  EXPECT_EQ(m.Feed(3, euro.substr(2) + "b").text, euro + "b");
  EXPECT_EQ(m.Feed(4, "\xF0\x9F").text, "");
  EXPECT_EQ(m.Flush(), "\xF0\x9F");  // cut short: released as is
}

// True when `s` is a sequence of complete UTF-8 characters (by lead bytes).
bool WholeCharacters(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : 4;
    if (i + n > s.size()) return false;
    i += n;
  }
  return true;
}

TEST(StopMatcherTest, RandomUtf8TextAndStopIds) {
  std::mt19937 rng(99);
  const std::vector<std::string> atoms = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "<", "|"};
  const std::vector<std::string> stops = {"<|", "\xE2\x82\xAC\xE2\x82\xAC"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = rng() % 25;
    for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    StopMatcher m({9}, stops);
    bool stopped = false;
    std::vector<std::string> pieces;
    std::string emitted = FeedInPieces(m, text, rng, &stopped, &pieces);
    const auto [want, want_stop] = Reference(text, stops);
    ASSERT_EQ(emitted, want);
    ASSERT_EQ(stopped, want_stop);
    // Whatever was emitted mid-stream always ends on a character boundary.
    std::string so_far;
    for (const std::string& p : pieces) {
      so_far += p;
      ASSERT_TRUE(WholeCharacters(so_far)) << "emitted a partial UTF-8 character";
    }
  }
}

}  // namespace
}  // namespace g4
