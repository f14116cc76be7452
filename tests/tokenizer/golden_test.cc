// Encode/Decode against goldens from the Rust `tokenizers` library
// (testdata/tokenizer/encode_golden.json, add_special_tokens=False,
// skip_special_tokens=False).
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gemma_tokenizer.h"

namespace g4 {
namespace {

using testing::GemmaTokenizer;

nlohmann::json LoadGolden() {
  std::ifstream in(testing::TestDataPath("tokenizer/encode_golden.json"));
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

TEST(TokenizerGolden, AllCasesEncodeExactly) {
  const nlohmann::json golden = LoadGolden();
  const auto& cases = golden.at("cases");
  ASSERT_EQ(cases.size(), 104u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].at("text");
    const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
    auto got = GemmaTokenizer().Encode(text);
    ASSERT_TRUE(got.ok()) << "case " << i << ": " << got.status().ToString();
    if (*got != want) ++failures;
    EXPECT_EQ(*got, want) << "case " << i << " text: " << text;
  }
  EXPECT_EQ(failures, 0);
}

TEST(TokenizerGolden, AllCasesDecodeExactly) {
  const nlohmann::json golden = LoadGolden();
  for (size_t i = 0; i < golden.at("cases").size(); ++i) {
    const auto& c = golden["cases"][i];
    // Decode the reference ids, not ours, so this checks Decode on its own.
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(GemmaTokenizer().Decode(ids), c.at("decoded").get<std::string>()) << "case " << i;
  }
}

// A second, larger reference: 1500 seeded random texts aimed at the edges
// (literal "▁", "> " before spaces, whitespace runs, control-token
// fragments, astral code points) with ids from the independent JavaScript
// implementation @huggingface/tokenizers 0.2.0, which also reproduces all
// of encode_golden.json.
TEST(TokenizerGolden, RandomTextsMatchTokenizersJs) {
  std::ifstream in(testing::TestDataPath("tokenizer/random_golden.json"));
  ASSERT_TRUE(in.good());
  const auto golden = nlohmann::json::parse(in);
  const auto& cases = golden.at("cases");
  ASSERT_EQ(cases.size(), 1500u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].at("text");
    const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
    auto got = GemmaTokenizer().Encode(text);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (*got != want && ++failures <= 5) ADD_FAILURE() << "case " << i << ": " << text;
    // The decoder maps every "▁" to " " and is otherwise lossless.
    std::string expected_text;
    for (size_t at = 0; at < text.size();) {
      if (text.compare(at, 3, "\xE2\x96\x81") == 0) {
        expected_text += ' ';
        at += 3;
      } else {
        expected_text += text[at++];
      }
    }
    EXPECT_EQ(GemmaTokenizer().Decode(want), expected_text) << "case " << i;
  }
  EXPECT_EQ(failures, 0);
}

// The word cache must not change results: encoding the same text twice,
// and all texts joined, gives the same ids as one by one.
TEST(TokenizerGolden, RepeatedAndConcatenatedEncodingsAgree) {
  const nlohmann::json golden = LoadGolden();
  for (const auto& c : golden.at("cases")) {
    const std::string text = c.at("text");
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    for (int rep = 0; rep < 2; ++rep) EXPECT_EQ(testing::MustEncode(text), want) << text;
    // A special token between copies isolates them, so ids concatenate.
    const std::string doubled = text + "<|turn>" + text;
    std::vector<int32_t> expected = want;
    expected.push_back(105);
    expected.insert(expected.end(), want.begin(), want.end());
    EXPECT_EQ(testing::MustEncode(doubled), expected) << text;
  }
}

// Encode is const and may run on several threads at once (the word cache is
// shared): every thread must still see the reference ids.
TEST(TokenizerGolden, ConcurrentEncodesAgree) {
  const nlohmann::json golden = LoadGolden();
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  for (const auto& c : golden.at("cases")) cases.emplace_back(c.at("text"), c.at("ids").get<std::vector<int32_t>>());
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = t; i < cases.size() + t; ++i) {
          const auto& [text, want] = cases[i % cases.size()];
          auto got = GemmaTokenizer().Encode(text);
          if (!got.ok() || *got != want) ++failures[t];
        }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace g4
