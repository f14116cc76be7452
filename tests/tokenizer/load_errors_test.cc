// Loading: model directories and tokenizer_config.json; every broken or
// unsupported input gives a Status naming the problem, never a crash.
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "core/mapped_file.h"
#include "gemma_tokenizer.h"
#include "synthetic_tokenizer.h"
#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;
using testing::Build;
using testing::SyntheticDoc;

TEST(TokenizerLoad, MissingFile) {
  auto tok = Tokenizer::Load("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(tok.ok());
  testing::ExpectTaggedError("[tokenizer]", tok.status(), StatusCode::kNotFound, {"/nonexistent/dir/tokenizer.json"});
}

TEST(TokenizerLoad, DirectoryWithoutTokenizerJson) {
  const std::string dir = testing::MakeTempDir();
  auto tok = Tokenizer::Load(dir);
  ASSERT_FALSE(tok.ok());
  testing::ExpectTaggedError("[tokenizer]", tok.status(), StatusCode::kNotFound, {"tokenizer.json"});
}

TEST(TokenizerLoad, ModelDirectoryReadsTokenizerConfig) {
  const std::string dir = testing::MakeTempDir();
  std::filesystem::create_symlink(testing::GemmaTokenizerPath(), dir + "/tokenizer.json");
  {
    auto tok = Tokenizer::Load(dir);  // no tokenizer_config.json: defaults
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_FALSE(tok->add_bos_token());
    EXPECT_EQ(tok->eos_id(), 1);
  }
  testing::WriteFileBytes(dir + "/tokenizer_config.json",
            R"({"add_bos_token": true, "bos_token": {"content": "<bos>"}, "eos_token": "<turn|>", "pad_token": "<pad>"})");
  {
    auto tok = Tokenizer::Load(dir);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_TRUE(tok->add_bos_token());
    EXPECT_FALSE(tok->add_eos_token());
    EXPECT_EQ(tok->bos_id(), 2);
    EXPECT_EQ(tok->eos_id(), 106);
    EXPECT_EQ(tok->pad_id(), 0);
  }
  testing::WriteFileBytes(dir + "/tokenizer_config.json", R"({"add_bos_token": tru)");
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(dir).status(), StatusCode::kCorrupt,
                             {"tokenizer_config.json", "not valid JSON"});
  testing::WriteFileBytes(dir + "/tokenizer_config.json", R"({"bos_token": "<no such token>"})");
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(dir).status(), StatusCode::kCorrupt,
                             {"bos_token", "<no such token>"});
}

TEST(TokenizerLoad, TruncatedOrMalformedJson) {
  auto full = ReadFileToString(testing::GemmaTokenizerPath());
  ASSERT_TRUE(full.ok());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{5000}, full->size() / 2, full->size() - 3}) {
    auto tok = Tokenizer::FromJson(std::string_view(*full).substr(0, cut), "cut.json");
    ASSERT_FALSE(tok.ok()) << cut;
    testing::ExpectTaggedError("[tokenizer]", tok.status(), StatusCode::kCorrupt,
                               {"cut.json", "malformed JSON", "byte"});
  }
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::FromJson("[1, 2]", "x.json").status(),
                             StatusCode::kCorrupt, {"top level"});
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::FromJson("{}", "x.json").status(),
                             StatusCode::kCorrupt, {"model"});
  testing::ExpectTaggedError("[tokenizer]",
                             Tokenizer::FromJson("{\"model\": {\"type\": \"BPE\"}}", "x.json").status(),
                             StatusCode::kCorrupt, {"vocab"});
}

TEST(TokenizerLoad, MalformedVocabAndMerges) {
  auto expect = [](const json& doc, StatusCode code, std::initializer_list<std::string> fragments) {
    auto tok = Build(doc);
    ASSERT_FALSE(tok.ok());
    testing::ExpectTaggedError("[tokenizer]", tok.status(), code, fragments);
  };
  json doc = SyntheticDoc();
  doc["model"]["vocab"]["d"] = "seven";
  expect(doc, StatusCode::kCorrupt, {"vocab entry 'd'"});
  doc = SyntheticDoc();
  doc["model"]["vocab"]["d"] = -1;
  expect(doc, StatusCode::kCorrupt, {"negative"});
  doc = SyntheticDoc();
  doc["model"]["vocab"]["d"] = 3;  // id of "c"
  expect(doc, StatusCode::kCorrupt, {"id 3"});
  doc = SyntheticDoc();
  doc["model"]["vocab"]["d"] = 2000000000;
  expect(doc, StatusCode::kCorrupt, {"sparse"});
  doc = SyntheticDoc();
  doc["model"]["merges"].push_back(json::array({"a", "q"}));
  expect(doc, StatusCode::kCorrupt, {"merge #2", "'q'"});
  doc = SyntheticDoc();
  doc["model"]["merges"].push_back(json::array({"c", "a"}));  // "ca" is not in the vocab
  expect(doc, StatusCode::kCorrupt, {"'ca'"});
  doc = SyntheticDoc();
  doc["model"]["merges"].push_back("a b c");
  expect(doc, StatusCode::kCorrupt, {"merge #2"});
  doc = SyntheticDoc();
  doc["model"]["merges"].push_back(json::array({"a"}));
  expect(doc, StatusCode::kCorrupt, {"merge #2"});
  doc = SyntheticDoc();
  doc["model"]["unk_token"] = "<missing>";
  expect(doc, StatusCode::kCorrupt, {"<missing>"});
  doc = SyntheticDoc();
  doc["added_tokens"] = json::parse(R"([{"id": 5, "content": "<x>"}])");
  expect(doc, StatusCode::kCorrupt, {"<x>", "next free id is 9"});
  doc = SyntheticDoc();
  doc["added_tokens"] = json::parse(R"([{"id": 5, "content": "a"}])");
  expect(doc, StatusCode::kCorrupt, {"vocab gives it id 1"});
  doc = SyntheticDoc();
  doc["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"String": " "}})");
  expect(doc, StatusCode::kCorrupt, {"content"});
}

TEST(TokenizerLoad, UnsupportedTypesAreNamed) {
  auto expect = [](const json& doc, std::initializer_list<std::string> fragments) {
    auto tok = Build(doc);
    ASSERT_FALSE(tok.ok());
    testing::ExpectTaggedError("[tokenizer]", tok.status(), StatusCode::kUnsupported, fragments);
  };
  json doc = SyntheticDoc();
  doc["model"]["type"] = "Unigram";
  expect(doc, {"model type 'Unigram'"});
  doc = SyntheticDoc();
  doc["model"] = json::parse(R"({"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"})");
  expect(doc, {"'WordPiece'"});
  doc = SyntheticDoc();
  doc["model"]["dropout"] = 0.1;
  expect(doc, {"dropout"});
  doc = SyntheticDoc();
  doc["model"]["continuing_subword_prefix"] = "##";
  expect(doc, {"continuing_subword_prefix"});
  doc = SyntheticDoc();
  doc["normalizer"] = json::parse(R"({"type": "NFKC"})");
  expect(doc, {"normalizer type 'NFKC'"});
  doc = SyntheticDoc();
  doc["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Lowercase"}]})");
  expect(doc, {"'Lowercase'"});
  doc = SyntheticDoc();
  doc["pre_tokenizer"] = json::parse(R"({"type": "ByteLevel", "add_prefix_space": false})");
  expect(doc, {"pre-tokenizer type 'ByteLevel'"});
  doc = SyntheticDoc();
  doc["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"})");
  expect(doc, {"Regex"});
  doc = SyntheticDoc();
  doc["decoder"] = json::parse(R"({"type": "Metaspace", "replacement": "\u2581"})");
  expect(doc, {"decoder type 'Metaspace'"});
  doc = SyntheticDoc();
  doc["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Replace",
      "pattern": {"String": "a"}, "content": "b"}]})");
  expect(doc, {"Replace after"});
  doc = SyntheticDoc();
  doc["added_tokens"] = json::parse(R"([{"id": 1, "content": "a", "lstrip": true}])");
  expect(doc, {"lstrip"});
  doc = SyntheticDoc();
  doc["added_tokens"] = json::parse(R"([{"id": 1, "content": "a", "normalized": true}])");
  expect(doc, {"normalized"});
}

// Random byte damage to a small but complete document: loading either
// succeeds (and the result encodes) or fails with a Status; never a crash.
TEST(TokenizerLoad, RandomCorruptionNeverCrashes) {
  json doc = SyntheticDoc();
  doc["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})");
  doc["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false})");
  doc["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]})");
  doc["added_tokens"] = json::parse(R"([{"id": 0, "content": "<unk>", "special": true}])");
  const std::string text = doc.dump();
  ASSERT_TRUE(Tokenizer::FromJson(text).ok());
  std::mt19937 rng(42);
  const std::string alphabet = "{}[]\",:0123456789 abtrueflsn-\\\xff";
  int loaded = 0;
#if defined(G4_SANITIZED_BUILD)
  const int trials = 600;  // the same trials' start; fuzz_tokenizer searches further under the sanitizers
#else
  const int trials = 3000;
#endif
  for (int trial = 0; trial < trials; ++trial) {
    std::string bad = text;
    const int edits = 1 + rng() % 3;
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bad.size();
      switch (rng() % 3) {
        case 0: bad[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: bad.erase(at, 1 + rng() % 4); break;
        default: bad.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
      if (bad.empty()) bad.push_back('x');
    }
    auto tok = Tokenizer::FromJson(bad, "fuzz.json");
    if (!tok.ok()) {
      EXPECT_FALSE(tok.status().message().empty());
      continue;
    }
    ++loaded;
    auto ids = tok->Encode("ab c zz\xC3\xA9 <unk>");
    ASSERT_TRUE(ids.ok());
    (void)tok->Decode(*ids);
  }
  EXPECT_GT(loaded, 0);
}

TEST(TokenizerEncode, InvalidUtf8IsRejectedWithOffset) {
  const Tokenizer& tok = testing::GemmaTokenizer();
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"\xFF", 0},
      {"abc\xC3", 3},                 // truncated 2-byte sequence at the end
      {"ab\xC3(", 2},                 // lead byte without continuation
      {"\xC0\xAF", 0},                // overlong '/'
      {"ok \xE0\x80\xAF", 3},         // overlong 3-byte
      {"\xED\xA0\x80", 0},            // UTF-16 surrogate
      {"12345678\xF4\x90\x80\x80", 8},  // past U+10FFFF
      {"\xF0\x9F\x98", 0},            // truncated emoji
      {"hello \x80 world", 6},        // stray continuation byte
  };
  for (const auto& [text, offset] : cases) {
    auto ids = tok.Encode(text);
    ASSERT_FALSE(ids.ok());
    testing::ExpectTaggedError("[tokenizer]", ids.status(), StatusCode::kInvalidArgument,
                               {"UTF-8", "offset " + std::to_string(offset)});
  }
  EXPECT_TRUE(tok.Encode("").ok());
  EXPECT_TRUE(tok.Encode(std::string("a\0b", 3)).ok());  // NUL is valid UTF-8
}

}  // namespace
}  // namespace g4
