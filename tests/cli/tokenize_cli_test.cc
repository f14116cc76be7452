// End-to-end tests of `g4 tokenize --json-array`: the golden file through the
// real binary (JSON in, JSON out), and exit codes plus one-line errors for
// bad input. Plain text, pieces and detokenize: tokenize_text_cli_test.cc.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace g4 {
namespace {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `g4 tokenize ARGS` with `input` on stdin.
Result Tokenize(const std::string& args, const std::string& input) {
  const std::string dir = testing::MakeTempDir();
  {
    std::ofstream in(dir + "/in.json", std::ios::binary);
    in << input;
  }
  const std::string cmd = testing::BinaryDir() + "/g4 tokenize " + args + " < " + dir + "/in.json > " + dir +
                          "/out.json 2> " + dir + "/err.txt";
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(dir + "/out.json");
  r.err = Slurp(dir + "/err.txt");
  return r;
}

std::string TokenizerFlag() {
  return "--json-array --tokenizer " + testing::TestDataPath("tokenizer/tokenizer.json");
}

TEST(TokenizeCli, GoldenFileRoundTrip) {
  std::ifstream in(testing::TestDataPath("tokenizer/encode_golden.json"));
  const auto golden = nlohmann::json::parse(in);
  nlohmann::json texts = nlohmann::json::array();
  for (const auto& c : golden.at("cases")) texts.push_back(c.at("text"));
  const Result r = Tokenize(TokenizerFlag(), texts.dump());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out.size(), golden["cases"].size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].at("ids"), golden["cases"][i].at("ids")) << i;
    EXPECT_EQ(out[i].at("decoded"), golden["cases"][i].at("decoded")) << i;
  }
}

TEST(TokenizeCli, ModelDirectory) {
  const Result r = Tokenize("--json-array --model " + testing::TestDataPath("tokenizer"), R"(["<|turn>user\n"])");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out[0]["ids"], nlohmann::json::parse("[105, 2364, 107]"));
  EXPECT_EQ(out[0]["decoded"], "<|turn>user\n");
}

TEST(TokenizeCli, BadInputIsOneLineErrorExit1) {
  for (const std::string& input : {std::string("[\"a\", "), std::string("{\"a\": 1}"), std::string("[\"a\", 3]"),
                                   std::string(""), std::string("[\"\xff\"]")}) {
    const Result r = Tokenize(TokenizerFlag(), input);
    EXPECT_EQ(r.exit_code, 1) << input;
    EXPECT_EQ(r.out, "") << input;
    ASSERT_FALSE(r.err.empty()) << input;
    EXPECT_EQ(r.err.rfind("g4 tokenize: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  const Result missing = Tokenize("--json-array --tokenizer /nonexistent/tokenizer.json", "[]");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/tokenizer.json"), std::string::npos) << missing.err;
}

TEST(TokenizeCli, UsageErrorsExit2) {
  EXPECT_EQ(Tokenize("", "[]").exit_code, 2);
  EXPECT_EQ(Tokenize(TokenizerFlag() + " --model /tmp", "[]").exit_code, 2);
  EXPECT_EQ(Tokenize("--no-such-flag", "[]").exit_code, 2);
  EXPECT_EQ(Tokenize("--help", "").exit_code, 0);
}

}  // namespace
}  // namespace g4
