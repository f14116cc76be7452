// One grammar for every g4 command, through the binary: usage errors exit 2
// with one "g4 CMD:" line, llama.cpp habits get a hint instead of being
// misread, -m and the first argument are the same, --stop takes one value,
// -t sets the threads, --help shows defaults, -q silences stderr, -v shows
// the settings and the seed (which reproduces the run), and every command
// that reports can do so as JSON.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
using testing::StderrOf;
using testing::RunG4;

std::string Tiny() { return testing::TestDataPath("models/tiny-e"); }

TEST(CliGrammar, UsageErrorsExit2WithOneCommandLine) {
  const std::string tmp = testing::MakeTempDir();
  const std::string demo = DemoModelDir();
  struct Case {
    std::string cmd, args;
  };
  const std::vector<Case> cases = {
      {"generate", demo},                                   // no prompt
      {"generate", "-m " + demo + " a b"},                  // one argument too many
      {"generate", demo + " hi --top-k x"},                 // not a number
      {"generate", demo + " hi --seed -2"},                 // below -1
      {"generate", demo + " hi --logit-bias 5"},            // not ID=BIAS
      {"generate", demo + " hi --logit-bias 999999=1"},     // outside the vocabulary (known after loading)
      {"generate", demo + " hi --no-such-flag"},
      {"generate", "hi"},                                   // no model (a prompt alone)
      {"chat", ""},
      {"chat", demo + " -v -q"},
      {"bench", ""},
      {"bench", demo + " --batch 0"},
      {"logits", demo},                                     // no --ids
      {"logits", demo + " --ids 1 --out " + tmp + "/x --kv"},
      {"perplexity", demo},                                 // no --file
      {"perplexity", demo + " -f " + tmp + "/missing.txt"},
      {"kv-eval", ""},
      {"kv-eval", "-m " + demo + " --preset e2b"},
      {"kv-eval", "--preset e3b"},
      {"quantize", Tiny()},                                 // no output
      {"quantize", Tiny() + " " + tmp + "/q --bits 7"},
      {"quantize", tmp + "/missing " + tmp + "/q"},
      {"synth", "--preset nope -o " + tmp + "/s"},
      {"synth", "--preset tiny"},
      {"tokenize", ""},
      {"tokenize", "--tokenizer x -m " + demo},
      {"detokenize", demo + " 1,x"},
      {"models", "--no-such-flag"},
  };
  for (const Case& c : cases) {
    const auto r = RunG4(c.cmd + " " + c.args + " </dev/null");
    EXPECT_EQ(r.exit_code, 2) << c.cmd << " " << c.args << "\n" << r.all;
    const std::string err = StderrOf(r);
    EXPECT_EQ(err.rfind("g4 " + c.cmd + ": ", 0), 0u) << c.cmd << " " << c.args << "\n" << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << c.cmd << " " << c.args << "\n" << err;
    EXPECT_EQ(r.out, "") << c.cmd << " " << c.args;
  }
}

TEST(CliGrammar, LlamaCppFlagsGetAHintInsteadOfBeingMisread) {
  struct Case {
    std::string args, hint;
  };
  const std::vector<Case> cases = {
      {"generate " + DemoModelDir() + " hi -ngl 99", "use --backend"},
      {"generate " + DemoModelDir() + " hi --n-gpu-layers=99", "use --backend"},
      {"chat " + DemoModelDir() + " -fa", "fused"},
      {"bench " + DemoModelDir() + " -ub 256", "--chunk"},
      {"generate " + DemoModelDir() + " hi -ctk q8_0", "--kv"},
      {"generate " + DemoModelDir() + " hi --hf-repo google/gemma-4-E2B-it", "-m"},
  };
  for (const Case& c : cases) {
    const auto r = RunG4(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.all;
    EXPECT_NE(r.all.find("is not a g4 flag"), std::string::npos) << r.all;
    EXPECT_NE(r.all.find(c.hint), std::string::npos) << r.all;
  }
  // A g4 flag that shares a llama.cpp spelling is g4's: -c is the context.
  const auto ok = RunG4("generate " + DemoModelDir() + " hi -c 64 -n 2 -q");
  EXPECT_EQ(ok.exit_code, 0) << ok.all;
}

TEST(CliGrammar, ModelFlagAndFirstArgumentAreTheSameAndStopTakesOneValue) {
  const std::string common = " --temp 0 -n 12 -q";
  const auto positional = RunG4("generate " + DemoModelDir() + " 'What is a Python dictionary?'" + common);
  ASSERT_EQ(positional.exit_code, 0) << positional.all;
  ASSERT_GT(positional.out.size(), 1u);
  for (const std::string& args :
       {"generate -m " + DemoModelDir() + " 'What is a Python dictionary?'" + common,
        "generate 'What is a Python dictionary?' --model " + DemoModelDir() + common,
        "generate -m " + DemoModelDir() + " -p 'What is a Python dictionary?'" + common,
        // --stop takes exactly one value: the prompt after it stays the prompt.
        "generate -m " + DemoModelDir() + " --stop QQQ --stop ZZZ 'What is a Python dictionary?'" + common}) {
    const auto r = RunG4(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.all;
    EXPECT_EQ(r.out, positional.out) << args;
  }
  // A stop string that occurs ends the text before it.
  const std::string word = positional.out.substr(positional.out.size() / 2, 3);
  const auto stopped = RunG4("generate " + DemoModelDir() + " 'What is a Python dictionary?' --stop '" + word + "'" + common);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.all;
  EXPECT_EQ(stopped.out.find(word), std::string::npos) << stopped.out;
  EXPECT_EQ(positional.out.rfind(stopped.out.substr(0, stopped.out.size() - 1), 0), 0u);
}

// -t sizes the CPU kernels' worker team too (the backend says how many
// threads it runs), also when OMP_PROC_BIND pins threads (libgomp then pins
// the main thread to one CPU before main(), which must not shrink the team).
TEST(CliGrammar, ThreadsFlagSetsTheThreadCount) {
  for (const char* bind : {"", "close"}) {
    ::setenv("OMP_PROC_BIND", bind, 1);
    for (int t : {1, 3}) {
      const auto r = RunG4("bench -m " + DemoModelDir() + " --backend cpu --prompt 4 --gen 2 --memcpy-mib 0 --json -t " +
                           std::to_string(t));
      ASSERT_EQ(r.exit_code, 0) << r.all;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["threads"].get<int>(), t);
      EXPECT_NE(j["backend"].get<std::string>().find(", " + std::to_string(t) + " threads"), std::string::npos)
          << "OMP_PROC_BIND=" << bind << ": " << j["backend"];
    }
    ::unsetenv("OMP_PROC_BIND");
  }
}

TEST(CliGrammar, HelpShowsDefaultsForEveryCommand) {
  struct Case {
    std::string cmd;
    std::vector<std::string> defaults;
  };
  const std::vector<Case> cases = {
      {"generate", {"--max-tokens,--n-predict INT", "in [0 - 2147483647]=512", "--kv TEXT=plain:bf16", "--seed INT", "=-1",
                    "--chunk", "=512", "model's"}},
      {"chat", {"=512", "--kv TEXT=plain:bf16", "--history-file"}},
      {"bench", {"--prompt INT", "=512", "--gen INT", "=64", "--warmup INT", "=2"}},
      {"perplexity", {"--ctx-size", "=512", "--kv TEXT=plain"}},
      {"kv-eval", {"--tokens INT", "=64", "=32768"}},
      {"quantize", {"--bits INT", "=4", "--group-size INT", "=64", "--force"}},
      {"synth", {"--quant TEXT", "=bf16"}},
      {"logits", {"--kv TEXT=plain", "--greedy INT", "=0"}},
      {"tokenize", {"--pieces", "--ids-only", "--json-array"}},
      {"detokenize", {"--tokenizer"}},
      {"models", {"--all", "HF_HUB_CACHE"}},
  };
  for (const Case& c : cases) {
    const auto r = RunG4(c.cmd + " --help");
    EXPECT_EQ(r.exit_code, 0) << c.cmd;
    EXPECT_NE(r.out.find("Usage: g4 " + c.cmd), std::string::npos) << r.out;
    for (const std::string& d : c.defaults) EXPECT_NE(r.out.find(d), std::string::npos) << c.cmd << ": " << d;
    if (c.cmd != "synth" && c.cmd != "models") {
      EXPECT_NE(r.out.find("-m,--model"), std::string::npos) << c.cmd;
    }
    EXPECT_NE(r.out.find("-q,--quiet"), std::string::npos) << c.cmd;
  }
}

TEST(CliGrammar, RandomSeedIsShownWithVerboseAndReproducesTheText) {
  const std::string args = "generate " + DemoModelDir() + " 'Name a sorting algorithm.' --temp 1 -n 24";
  std::vector<std::string> seeds;
  for (const char* seed : {"", " --seed -1"}) {
    const auto r = RunG4(args + std::string(seed) + " -v");
    ASSERT_EQ(r.exit_code, 0) << r.all;
    std::smatch m;
    const std::string err = StderrOf(r);
    ASSERT_TRUE(std::regex_search(err, m, std::regex("seed ([0-9]+)"))) << err;
    seeds.push_back(m[1]);
    EXPECT_NE(err.find("model directory"), std::string::npos) << err;
    EXPECT_NE(err.find("kv plain:bf16"), std::string::npos) << err;
    // The printed seed gives back the same text.
    const auto again = RunG4(args + " -q --seed " + seeds.back());
    ASSERT_EQ(again.exit_code, 0) << again.all;
    EXPECT_EQ(again.out, r.out);
  }
  EXPECT_NE(seeds[0], seeds[1]);  // 63 random bits each time
}

TEST(CliGrammar, QuietLeavesStderrEmpty) {
  const std::string tmp = testing::MakeTempDir();
  for (const std::string& args :
       {"generate " + DemoModelDir() + " hi -n 4 -q", "synth --preset tiny --quant q4 -o " + tmp + "/s -q",
        "quantize " + Tiny() + " " + tmp + "/q -q", "tokenize " + DemoModelDir() + " hello -q",
        "perplexity " + DemoModelDir() + " -f " + DemoModelDir() + "/README.md -c 32 --chunks 1 -q"}) {
    const auto r = RunG4(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.all;
    EXPECT_EQ(StderrOf(r), "") << args;
  }
}

TEST(CliGrammar, EveryReportingCommandSpeaksJson) {
  const std::string tmp = testing::MakeTempDir();
  const std::vector<std::string> commands = {
      "generate " + DemoModelDir() + " hi -n 4 --json",
      "bench " + DemoModelDir() + " --prompt 4 --gen 2 --memcpy-mib 0 --json",
      "kv-eval --preset e2b --json",
      "kv-eval " + Tiny() + " --tokens 4 --kv plain --kv affine:8 --json",
      "perplexity " + DemoModelDir() + " -f " + DemoModelDir() + "/README.md -c 32 --chunks 1 --json",
      "quantize " + Tiny() + " " + tmp + "/q --json",
      "synth --preset tiny --quant q4 -o " + tmp + "/s --json",
      "tokenize " + DemoModelDir() + " hello --json",
      "detokenize " + DemoModelDir() + " 5,6 --json",
      "models " + DemoModelDir() + " --json",
  };
  for (const std::string& c : commands) {
    const auto r = RunG4(c);
    ASSERT_EQ(r.exit_code, 0) << c << "\n" << r.all;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << c << "\n" << r.out;
  }
}

}  // namespace
}  // namespace g4
