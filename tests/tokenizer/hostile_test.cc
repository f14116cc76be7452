// Hostile tokenizer.json inputs (issue 11): deep Sequence nesting, Replace
// chains that grow text, long added tokens, merges given as an object,
// duplicate keys, and paths that loop or are not files.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/json.h"
#include "core/limits.h"
#include "gemma_tokenizer.h"
#include "synthetic_tokenizer.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;
using testing::Build;
using testing::SyntheticDoc;

// The synthetic document with `field` (normalizer, pre_tokenizer, decoder)
// replaced by `depth` nested Sequences around one valid step.
std::string NestedSequence(const std::string& field, int depth) {
  const std::string list = field == "normalizer" ? "normalizers" : field == "decoder" ? "decoders" : "pretokenizers";
  const std::string leaf = field == "pre_tokenizer"
                               ? R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"})"
                               : R"({"type": "Replace", "pattern": {"String": "x"}, "content": "y"})";
  std::string nested;
  nested.reserve(static_cast<size_t>(depth) * 48 + leaf.size());
  for (int i = 0; i < depth; ++i) nested += "{\"type\": \"Sequence\", \"" + list + "\": [";
  nested += leaf;
  for (int i = 0; i < depth; ++i) nested += "]}";
  json doc = SyntheticDoc();
  doc[field] = "@@";
  std::string text = doc.dump();
  text.replace(text.find("\"@@\""), 4, nested);
  return text;
}

TEST(TokenizerHostile, SequenceNested100000DeepIsACleanError) {
  for (const char* field : {"normalizer", "pre_tokenizer", "decoder"}) {
    testing::ExpectTaggedError("[tokenizer]",
                               Tokenizer::FromJson(NestedSequence(field, 100000), "deep.json").status(),
                               StatusCode::kCorrupt, {"deep.json", "kMaxJsonDepth"});
    // A few levels are still fine.
    auto shallow = Tokenizer::FromJson(NestedSequence(field, 5), "shallow.json");
    EXPECT_TRUE(shallow.ok()) << field << ": " << shallow.status().ToString();
  }
}

TEST(TokenizerHostile, ReplaceChainsThatGrowTextAreRefused) {
  // Eight rules, each replacing "a" by ten of them: 10^8-fold.
  json rules = json::array();
  for (int i = 0; i < 8; ++i)
    rules.push_back({{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(10, 'a')}});
  json doc = SyntheticDoc();
  doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", rules}};
  testing::ExpectTaggedError("[tokenizer]", Build(doc).status(), StatusCode::kOutOfRange,
              {"normalizer Replace rules can grow text 1e+08-fold", "limit of 8", "kMaxNormalizeGrowth"});
  doc = SyntheticDoc();
  doc["decoder"] = {{"type", "Sequence"}, {"decoders", rules}};
  testing::ExpectTaggedError("[tokenizer]", Build(doc).status(), StatusCode::kOutOfRange,
                             {"decoder Replace rules", "kMaxNormalizeGrowth"});

  // Growth within the limit is fine, and the text really grows that much.
  doc = SyntheticDoc();
  doc["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "Replace"}, {"pattern", {{"String", "c"}}}, {"content", "cab"}},
                                        {{"type", "Replace"}, {"pattern", {{"String", "q"}}}, {"content", "b"}}}}};
  auto tok = Build(doc);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto ids = tok->Encode("c");  // "cab": c(3) then ab(4) by the a+b merge
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{3, 4}));
}

TEST(TokenizerHostile, LongAddedTokenEncodesCorrectly) {
  // The issue's 50,001-byte added token; 100 KB of text matching its prefix.
  json doc = SyntheticDoc();
  const std::string token(50001, 'a');
  doc["added_tokens"] = json::array({{{"id", 9}, {"content", token}, {"special", false}}});
  auto tok = Build(doc);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto ids = tok->Encode(std::string(100000, 'a'));
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  // The token, then 49,999 single "a"s (no a+a merge in the synthetic model).
  ASSERT_EQ(ids->size(), 1u + 49999u);
  EXPECT_EQ((*ids)[0], 9);
  for (size_t i = 1; i < ids->size(); ++i) ASSERT_EQ((*ids)[i], 1) << i;
  auto piece = tok->IdToPiece(9);
  ASSERT_TRUE(piece.has_value());
  EXPECT_TRUE(*piece == token);  // not EXPECT_EQ: a failure would print 50 KB
}

TEST(TokenizerHostile, MergesMustBeAList) {
  json doc = SyntheticDoc();
  doc["model"]["merges"] = {{"a", "b"}};
  testing::ExpectTaggedError("[tokenizer]", Build(doc).status(), StatusCode::kCorrupt,
                             {"model.merges is an object, not a list of merges"});
  doc["model"]["merges"] = "a b";
  testing::ExpectTaggedError("[tokenizer]", Build(doc).status(), StatusCode::kCorrupt, {"model.merges is a string"});
  doc["model"]["merges"] = nullptr;  // null is "no merges"
  EXPECT_TRUE(Build(doc).ok());
}

TEST(TokenizerHostile, DuplicateKeysAreErrors) {
  std::string text = SyntheticDoc().dump();
  text.insert(1, R"("normalizer": {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}, )");
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::FromJson(text, "dup.json").status(), StatusCode::kCorrupt,
              {"dup.json", "\"normalizer\" appears twice"});
  std::string vocab_twice = SyntheticDoc().dump();
  const size_t model = vocab_twice.find("\"model\":{");
  ASSERT_NE(model, std::string::npos);
  vocab_twice.insert(model + 9, R"("vocab": {"z": 0}, )");
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::FromJson(vocab_twice, "dup.json").status(), StatusCode::kCorrupt,
              {"model.vocab appears twice"});
}

TEST(TokenizerHostile, PathsThatLoopOrAreNotFiles) {
  ::alarm(10);  // a FIFO that blocks open() would hang here
  const std::string dir = testing::MakeTempDir();
  // A tokenizer.json that links to itself, in a model directory and alone.
  ASSERT_EQ(::symlink((dir + "/tokenizer.json").c_str(), (dir + "/tokenizer.json").c_str()), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(dir).status(), StatusCode::kInvalidArgument,
                             {"tokenizer.json", "symbolic links"});
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(dir + "/tokenizer.json").status(),
                             StatusCode::kInvalidArgument, {"symbolic links"});
  // The model directory itself a loop.
  ASSERT_EQ(::symlink((dir + "/m").c_str(), (dir + "/m").c_str()), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(dir + "/m").status(),
                             StatusCode::kInvalidArgument, {"symbolic links"});

  const std::string d2 = testing::MakeTempDir();
  ASSERT_EQ(::mkdir((d2 + "/tokenizer.json").c_str(), 0755), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(d2).status(), StatusCode::kInvalidArgument,
              {"[tokenizer] " + d2 + "/tokenizer.json is a directory, not a file"});

  const std::string d3 = testing::MakeTempDir();
  ASSERT_EQ(::mkfifo((d3 + "/tokenizer.json").c_str(), 0644), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(d3).status(), StatusCode::kInvalidArgument,
                             {"named pipe (FIFO)"});

  const std::string d4 = testing::MakeTempDir();
  ASSERT_EQ(::symlink("/dev/zero", (d4 + "/tokenizer.json").c_str()), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(d4).status(), StatusCode::kInvalidArgument,
                             {"character device"});

  const std::string d5 = testing::MakeTempDir();
  testing::WriteFileBytes(d5 + "/tokenizer.json", "{}");
  ASSERT_EQ(::truncate((d5 + "/tokenizer.json").c_str(), static_cast<off_t>(kMaxTokenizerBytes + 1)), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(d5).status(), StatusCode::kOutOfRange,
                             {"kMaxTokenizerBytes"});

  // tokenizer_config.json next to a good tokenizer.json: same policy.
  const std::string d6 = testing::MakeTempDir();
  ASSERT_EQ(::symlink(testing::GemmaTokenizerPath().c_str(), (d6 + "/tokenizer.json").c_str()), 0);
  ASSERT_EQ(::mkdir((d6 + "/tokenizer_config.json").c_str(), 0755), 0);
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(d6).status(), StatusCode::kInvalidArgument,
                             {"tokenizer_config.json is a directory"});
  ::alarm(0);
}

TEST(TokenizerHostile, TokenizerConfigIsBoundedJson) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(::symlink(testing::GemmaTokenizerPath().c_str(), (dir + "/tokenizer.json").c_str()), 0);
  testing::WriteFileBytes(dir + "/tokenizer_config.json", "{\"bos_token\": " + std::string(100000, '['));
  testing::ExpectTaggedError("[tokenizer]", Tokenizer::Load(dir).status(), StatusCode::kCorrupt,
                             {"tokenizer_config.json", "kMaxJsonDepth"});
}

TEST(TokenizerHostile, NonUtf8ChatContentNamesMessageAndOffset) {
  // The offset is into the message, not into the rendered template.
  std::vector<ChatMessage> msgs{TextMessage("system", "Be brief."), TextMessage("user", "abc\xff")};
  auto r = RenderChat(msgs, ChatOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("[chat] messages[1].content is not valid UTF-8: byte 0xFF at offset 3 of 4"),
            std::string::npos)
      << r.status().message();
  ChatOptions tools;
  tools.tools = {{"t", "desc\xc3", ""}};
  msgs[1].content = "fine";
  auto t = RenderChat(msgs, tools);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("tools[0].description is not valid UTF-8"), std::string::npos)
      << t.status().message();
}

TEST(TokenizerHostile, ManyToolCallMarkersWithoutBraces) {
  // Each marker used to search the rest of the text for '{': quadratic.
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "<|tool_call>call:f ";
  ParsedToolCalls p = ParseToolCalls(text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_TRUE(p.text == text);  // unparsed markers stay as they were
  // A call after them still parses.
  p = ParseToolCalls(text + "<|tool_call>call:g{a:1}<tool_call|>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "g");
  EXPECT_EQ(p.calls[0].arguments_json, "{\"a\":1}");
}

TEST(TokenizerHostile, ToolCallWithManyKeysParses) {
  // ordered_json's linear key lookup made this quadratic.
  std::string call = "<|tool_call>call:f{";
  for (int i = 0; i < 100000; ++i) call += (i ? ",k" : "k") + std::to_string(i) + ":1";
  call += ",k7:2}<tool_call|>";  // a repeated key: first place, last value
  ParsedToolCalls p = ParseToolCalls(call);
  ASSERT_EQ(p.calls.size(), 1u);
  // (Not ordered_json::parse: it is quadratic in the key count itself.)
  auto parsed = ParseJsonBounded<nlohmann::ordered_json>(p.calls[0].arguments_json, "test", "");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const nlohmann::ordered_json& args = *parsed;
  EXPECT_EQ(args.size(), 100000u);
  EXPECT_EQ(args["k7"], 2);
  EXPECT_EQ(std::next(args.begin(), 7).key(), "k7");
}

}  // namespace
}  // namespace g4
