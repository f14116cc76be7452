// End-to-end tests of `g4 quantize` and `g4 perplexity` through the binary:
// the outputs a user relies on, and clean failures (exit code, message, no
// crash) on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;

using testing::RunG4;
using RunResult = testing::G4Run;

TEST(QuantizeCli, WritesALoadableCheckpointAndReportsIt) {
  const std::string out = testing::MakeTempDir() + "/q8";
  const RunResult r = RunG4("quantize " + testing::TestDataPath("models/tiny-e") + " " + out + " --bits 8");
  ASSERT_EQ(r.exit_code, 0) << r.all;
  EXPECT_NE(r.out.find("8-bit, group 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matrices quantized"), std::string::npos) << r.out;
  std::ifstream cfg(out + "/config.json");
  const auto j = nlohmann::json::parse(cfg);
  EXPECT_EQ(j["quantization"]["bits"], 8);
  EXPECT_EQ(j["quantization"]["group_size"], 64);
  // The result runs: logits of a short prompt.
  const RunResult l = RunG4("logits --model " + out + " --ids 5,17,3 --out " + out + "/l.safetensors");
  EXPECT_EQ(l.exit_code, 0) << l.all;
}

TEST(QuantizeCli, BadArgumentsFailCleanly) {
  const std::string tiny = testing::TestDataPath("models/tiny-e");
  const std::string tmp = testing::MakeTempDir();
  for (const std::string& args : {"quantize " + tiny + " " + tmp + "/a --bits 7",
                                  "quantize " + tiny + " " + tmp + "/b --group-size 100",
                                  "quantize " + tmp + "/missing " + tmp + "/c", "quantize " + tiny}) {
    const RunResult r = RunG4(args);
    EXPECT_FALSE(r.signaled) << args;
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.all;
  }
  const RunResult q = RunG4("quantize " + testing::TestDataPath("models/tiny-e-q4") + " " + tmp + "/d");
  EXPECT_EQ(q.exit_code, 1) << q.all;
  EXPECT_NE(q.all.find("already quantized"), std::string::npos) << q.all;
}

TEST(PerplexityCli, JsonResultOnTheDemoModel) {
  const std::string dir = testing::MakeTempDir();
  {
    std::ofstream english(dir + "/english.txt");
    for (int i = 0; i < 12; ++i)
      english << "The package manager downloads the files, checks their signatures and installs them. "
                 "In the beginning God created the heaven and the earth.\n";
    std::ofstream noise(dir + "/noise.txt");
    std::mt19937 rng(3);
    for (int i = 0; i < 1500; ++i) noise << static_cast<char>('a' + rng() % 26) << (rng() % 4 ? "" : " ");
  }
  const RunResult r =
      RunG4("perplexity --model " + DemoModelDir() + " --file " + dir + "/english.txt --ctx 64 --chunks 4 --json --kl --kv affine:8");
  ASSERT_EQ(r.exit_code, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["windows"].get<int>(), 4);
  EXPECT_EQ(j["scored"].get<int>(), j["windows"].get<int>() * (64 - 1 - 32));
  const double ppl = j["ppl"];
  EXPECT_TRUE(std::isfinite(ppl));
  EXPECT_GT(ppl, 1.0);
  EXPECT_GE(j["kl_vs_plain"].get<double>(), 0.0);
  EXPECT_LT(j["kl_vs_plain"].get<double>(), 0.05);
  EXPECT_GT(j["top1_agreement"].get<double>(), 0.9);
  // A model trained on English finds English far likelier than letter noise.
  const RunResult n = RunG4("perplexity --model " + DemoModelDir() + " --file " + dir + "/noise.txt --ctx 64 --chunks 4 --json");
  ASSERT_EQ(n.exit_code, 0) << n.all;
  EXPECT_GT(nlohmann::json::parse(n.out)["ppl"].get<double>(), 3 * ppl);
}

TEST(PerplexityCli, BadInputFailsCleanly) {
  const std::string tmp = testing::MakeTempDir();
  {
    std::ofstream(tmp + "/short.txt") << "Too short.";
    std::ofstream(tmp + "/bad.txt") << std::string("caf\xc3", 4) << std::string(300, 'a');
  }
  struct Case { std::string args; int code; };
  const std::vector<Case> cases = {
      {"perplexity --model " + DemoModelDir() + " --file " + tmp + "/missing.txt", 2},
      {"perplexity --model " + DemoModelDir() + " --file " + tmp + "/short.txt --ctx 512", 1},
      {"perplexity --model " + DemoModelDir() + " --file " + tmp + "/bad.txt --ctx 16", 1},
      {"perplexity --model " + DemoModelDir() + " --file " + tmp + "/short.txt --ctx 2", 2},
      {"perplexity --model " + DemoModelDir() + " --file " + tmp + "/short.txt --kv nonsense", 1},
  };
  for (const Case& c : cases) {
    const RunResult r = RunG4(c.args);
    EXPECT_FALSE(r.signaled) << c.args;
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.all;
    if (c.code == 1) {
      EXPECT_NE(r.all.find("g4 perplexity:"), std::string::npos) << r.all;
    }
  }
}

}  // namespace
}  // namespace g4
