// BPE rules on small synthetic vocabularies: merge priority, unk and byte
// fallback, pre-tokenizer split behaviours, the word-chunking shortcut.
#include <gtest/gtest.h>

#include "synthetic_tokenizer.h"

namespace g4 {
namespace {

using nlohmann::json;
using testing::Build;
using testing::SyntheticDoc;
using Ids = std::vector<int32_t>;

Ids EncodeWith(const json& doc, std::string_view text) {
  auto tok = Build(doc);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) return {};
  auto ids = tok->Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : Ids{};
}

TEST(BpeRules, LowestRankMergesFirst) {
  json doc = SyntheticDoc();
  // a+b (rank 0) wins over b+c (rank 1): "abc" -> ab, c.
  EXPECT_EQ(EncodeWith(doc, "abc"), (Ids{4, 3}));
  // With b+c first and a+bc available, "abc" -> a, bc -> abc.
  doc["model"]["merges"] = json::parse(R"([["b", "c"], ["a", "b"], ["a", "bc"]])");
  EXPECT_EQ(EncodeWith(doc, "abc"), (Ids{6}));
  // String form of merges is read the same way.
  doc["model"]["merges"] = json::parse(R"(["b c", "a b", "a bc"])");
  EXPECT_EQ(EncodeWith(doc, "abc"), (Ids{6}));
}

TEST(BpeRules, EqualPairsMergeLeftmostFirst) {
  json doc = SyntheticDoc();
  doc["model"]["vocab"]["aa"] = 9;
  doc["model"]["merges"] = json::parse(R"([["a", "a"]])");
  // "aaa": the leftmost "a a" merges, leaving the third a.
  EXPECT_EQ(EncodeWith(doc, "aaa"), (Ids{9, 1}));
  EXPECT_EQ(EncodeWith(doc, "aaaa"), (Ids{9, 9}));
}

TEST(BpeRules, UnknownCharactersAndFuseUnk) {
  json doc = SyntheticDoc();
  EXPECT_EQ(EncodeWith(doc, "zzab"), (Ids{0, 0, 4}));
  doc["model"]["fuse_unk"] = true;
  EXPECT_EQ(EncodeWith(doc, "zzab"), (Ids{0, 4}));
  EXPECT_EQ(EncodeWith(doc, "azzb"), (Ids{1, 0, 2}));
  // Without an unk token HF drops the character; its neighbours then meet and merge.
  doc["model"]["unk_token"] = nullptr;
  EXPECT_EQ(EncodeWith(doc, "azb"), (Ids{4}));
  EXPECT_EQ(EncodeWith(doc, "zcz"), (Ids{3}));
}

TEST(BpeRules, ByteFallbackUsesByteTokens) {
  json doc = SyntheticDoc();
  doc["model"]["byte_fallback"] = true;
  // "A" is not a piece but <0x41> is; "é" (C3 A9) has no byte tokens -> unk.
  EXPECT_EQ(EncodeWith(doc, "aAb"), (Ids{1, 8, 2}));
  EXPECT_EQ(EncodeWith(doc, "\xC3\xA9"), (Ids{0}));
  doc["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]})");
  auto tok = Build(doc);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->Decode(Ids{1, 8, 2}), "aAb");
  // Without a decoder HF joins the token strings with spaces.
  doc["decoder"] = nullptr;
  tok = Build(doc);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->Decode(Ids{1, 8, 2}), "a <0x41> b");
}

TEST(BpeRules, NormalizerAndDecoderReplace) {
  json doc = SyntheticDoc();
  doc["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})");
  doc["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "Fuse"}]})");
  auto tok = Build(doc);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(*tok->Encode("ab c"), (Ids{4, 7, 3}));
  EXPECT_EQ(tok->Decode(Ids{4, 7, 3}), "ab c");
}

// Pre-tokens never merge across their boundaries, so the split shape is
// visible in the ids: "ab" stays one token only if a and b share a piece.
TEST(BpeRules, SplitBehaviours) {
  json doc = SyntheticDoc();
  doc["model"]["vocab"]["-"] = 10;
  doc["model"]["vocab"]["b-"] = 11;
  doc["model"]["vocab"]["-a"] = 12;
  doc["model"]["merges"] = json::parse(R"([["b", "-"], ["-", "a"], ["a", "b"]])");
  auto split = [&](const char* behavior, bool invert = false) {
    json d = doc;
    d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
    return EncodeWith(d, "ab-ab");
  };
  // No split: b+- merges first (rank 0), then a, b-, a b -> ab.
  EXPECT_EQ(EncodeWith(doc, "ab-ab"), (Ids{1, 11, 4}));
  EXPECT_EQ(split("Removed"), (Ids{4, 4}));
  EXPECT_EQ(split("Isolated"), (Ids{4, 10, 4}));
  EXPECT_EQ(split("MergedWithPrevious"), (Ids{1, 11, 4}));  // "ab-", "ab"
  EXPECT_EQ(split("MergedWithNext"), (Ids{4, 12, 2}));      // "ab", "-ab"
  EXPECT_EQ(split("Contiguous"), (Ids{4, 10, 4}));
  // Inverted: the non-dash runs are the "matches" and get removed.
  EXPECT_EQ(split("Removed", true), (Ids{10}));
}

// The chunking shortcut must not cut where a piece spans "c▁".
TEST(BpeRules, ChunkingRespectsPiecesThatSpanTheMarker) {
  json doc = SyntheticDoc();
  doc["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})");
  doc["model"]["vocab"]["c\u2581"] = 9;
  doc["model"]["vocab"]["\u2581a"] = 10;
  doc["model"]["merges"] = json::parse(R"([["c", "\u2581"], ["\u2581", "a"], ["a", "b"]])");
  // "c a": c+▁ (rank 0) beats ▁+a, so ids are c▁, a — a cut before ▁ would give c, ▁a.
  EXPECT_EQ(EncodeWith(doc, "c a"), (Ids{9, 1}));
  // After "b" (never followed by ▁ in a piece) the cut is harmless: ▁+a merges.
  EXPECT_EQ(EncodeWith(doc, "ab ab"), (Ids{4, 10, 2}));
}

TEST(BpeRules, AddedTokensSplitBeforeNormalization) {
  json doc = SyntheticDoc();
  doc["model"]["vocab"]["<x>"] = 9;
  doc["model"]["vocab"]["<xy>"] = 10;
  doc["added_tokens"] = json::parse(R"([
    {"id": 9, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 10, "content": "<xy>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
    {"id": 11, "content": "NEW", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}])");
  auto tok = Build(doc);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->vocab_size(), 12);  // NEW is past the model vocabulary
  EXPECT_EQ(*tok->Encode("ab<x>c<xy>NEWa"), (Ids{4, 9, 3, 10, 11, 1}));
  EXPECT_TRUE(tok->IsSpecial(9));
  EXPECT_FALSE(tok->IsSpecial(10));
  EXPECT_EQ(tok->IdToPiece(11), "NEW");
  EXPECT_EQ(tok->PieceToId("NEW"), 11);
}

}  // namespace
}  // namespace g4
