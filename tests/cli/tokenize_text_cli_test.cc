// `g4 tokenize` on plain text and `g4 detokenize`, through the binary,
// against the Rust `tokenizers` goldens (testdata/tokenizer/encode_golden.json)
// and the vocabulary of tokenizer.json itself.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace g4 {
namespace {

using nlohmann::json;
using testing::RunG4;

std::string TokFlag() { return "--tokenizer " + testing::TestDataPath("tokenizer/tokenizer.json"); }

json Golden() {
  std::ifstream in(testing::TestDataPath("tokenizer/encode_golden.json"));
  return json::parse(in);
}

// A few golden cases: long English, whitespace runs, non-Latin, bytes.
std::vector<json> SomeCases() {
  const json g = Golden();
  std::vector<json> out;
  for (size_t i = 0; i < g["cases"].size(); i += 29) out.push_back(g["cases"][i]);
  return out;
}

std::string StdinFile(const std::string& text) {
  const std::string path = testing::MakeTempDir() + "/in.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(TokenizeText, StdinTextGivesTheGoldenIds) {
  for (const json& c : SomeCases()) {
    const std::string text = c["text"];
    const auto r = RunG4("tokenize " + TokFlag() + " --ids-only -q < " + StdinFile(text));
    ASSERT_EQ(r.exit_code, 0) << r.all;
    EXPECT_EQ(json::parse(r.out), c["ids"]) << text;
    // The default listing: one line per token, id then its text as JSON.
    const auto lines = RunG4("tokenize " + TokFlag() + " -q < " + StdinFile(text));
    ASSERT_EQ(lines.exit_code, 0);
    std::istringstream in(lines.out);
    std::vector<int> ids;
    int id;
    std::string rest;
    while (in >> id && std::getline(in, rest)) {
      ids.push_back(id);
      EXPECT_TRUE(json::parse(rest, nullptr, false).is_string()) << rest;
    }
    EXPECT_EQ(json(ids), c["ids"]);
  }
  // The TEXT argument is the same as stdin.
  const auto arg = RunG4("tokenize " + TokFlag() + " --ids-only -q 'Hello world'");
  const auto in = RunG4("tokenize " + TokFlag() + " --ids-only -q < " + StdinFile("Hello world"));
  EXPECT_EQ(arg.out, in.out);
  EXPECT_NE(arg.out, "[]\n");
}

TEST(TokenizeText, PiecesAreTheVocabularyEntries) {
  std::ifstream in(testing::TestDataPath("tokenizer/tokenizer.json"));
  const json tok = json::parse(in);
  std::map<int, std::string> pieces;
  for (const auto& [piece, id] : tok["model"]["vocab"].items()) pieces[id.get<int>()] = piece;
  const json c = SomeCases()[1];
  const auto r = RunG4("tokenize " + TokFlag() + " --pieces -q < " + StdinFile(c["text"]));
  ASSERT_EQ(r.exit_code, 0) << r.all;
  std::istringstream lines(r.out);
  int id, n = 0;
  std::string rest;
  while (lines >> id && std::getline(lines, rest)) {
    ASSERT_TRUE(pieces.count(id)) << id;
    EXPECT_EQ(json::parse(rest).get<std::string>(), pieces[id]) << id;
    ++n;
  }
  EXPECT_EQ(n, static_cast<int>(c["ids"].size()));
}

TEST(TokenizeText, DetokenizeGivesTheGoldenText) {
  for (const json& c : SomeCases()) {
    std::string ids;
    for (const json& id : c["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    const auto r = RunG4("detokenize " + TokFlag() + " --json " + ids);
    ASSERT_EQ(r.exit_code, 0) << r.all;
    EXPECT_EQ(json::parse(r.out)["text"], c["decoded"]);
  }
  // tokenize --ids-only pipes back into detokenize.
  const auto round = RunG4("tokenize " + TokFlag() + " --ids-only -q 'caf\xc3\xa9 <|turn> 42' | " +
                           testing::BinaryDir() + "/g4 detokenize " + TokFlag());
  ASSERT_EQ(round.exit_code, 0) << round.all;
  EXPECT_EQ(round.out, "caf\xc3\xa9 <|turn> 42\n");
  const auto bad = RunG4("detokenize " + TokFlag() + " 5,99999999");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.all.find("outside the vocabulary"), std::string::npos) << bad.all;
}

}  // namespace
}  // namespace g4
