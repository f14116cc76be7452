// The batched engine from the command line: `g4 generate --prompts` gives
// every prompt its solo greedy text, in input order; `g4 logits` with
// several --ids gives every sequence its solo logits bit for bit; `g4 bench
// --batch` reports aggregate and per-row decode speed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
using testing::RunG4;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(GenerateCli, PromptsFileGivesEveryPromptItsSoloGreedyText) {
  const std::vector<std::string> prompts = {"What is a Python dictionary?", "Name a sorting algorithm.",
                                            "How do I read a file?", "Explain recursion briefly."};
  const std::string file = testing::MakeTempDir() + "/prompts.txt";
  {
    std::ofstream out(file);
    out << prompts[0] << "\n" << prompts[1] << "\n\n";
    // A JSON line with its own options.
    out << nlohmann::json{{"prompt", prompts[2]}, {"max_tokens", 7}}.dump() << "\n";
    out << prompts[3] << "\n";
  }
  auto batch = RunG4("generate " + DemoModelDir() + " --prompts " + file + " --temp 0 -n 20 --max-seqs 3 --chunk 24");
  ASSERT_EQ(batch.exit_code, 0) << batch.all;
  const auto lines = Lines(batch.out);
  ASSERT_EQ(lines.size(), prompts.size()) << batch.out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["index"], i);
    const int n = i == 2 ? 7 : 20;
    auto solo = RunG4("generate " + DemoModelDir() + " \"" + prompts[i] + "\" --temp 0 -n " + std::to_string(n));
    ASSERT_EQ(solo.exit_code, 0) << solo.all;
    std::string text = solo.out;
    ASSERT_FALSE(text.empty());
    text.pop_back();  // the newline after the answer
    EXPECT_EQ(j["text"].get<std::string>(), text) << "prompt " << i;
    EXPECT_LE(j["completion_tokens"].get<int>(), n);
  }
}

TEST(GenerateCli, BadPromptsFileIsOneClearError) {
  const std::string file = testing::MakeTempDir() + "/bad.txt";
  {
    std::ofstream out(file);
    out << "fine\n{\"prompt\": 3}\n";
  }
  auto r = RunG4("generate " + DemoModelDir() + " --prompts " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.all.find("line 2"), std::string::npos) << r.all;
  auto both = RunG4("generate " + DemoModelDir() + " hello --prompts " + file);
  EXPECT_NE(both.exit_code, 0);
}

TEST(LogitsCli, SeveralIdsRunAsOneBatchWithTheirSoloLogits) {
  const std::string dir = testing::TestDataPath("models/tiny-e");
  const std::string tmp = testing::MakeTempDir();
  const std::vector<std::string> ids = {"5,17,3,200,9,41,7", "1,2", "300,301,302,303,304,305,306,307,308,309,310"};
  std::string args = "logits --model " + dir + " --greedy 4 --chunk 6 --decode-ids 11,12 --out " + tmp + "/all.st";
  for (const auto& i : ids) args += " --ids " + i;
  auto r = RunG4(args);
  ASSERT_EQ(r.exit_code, 0) << r.all;
  auto all = SafetensorsFile::Open(tmp + "/all.st");
  ASSERT_TRUE(all.ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string solo_path = tmp + "/solo" + std::to_string(i) + ".st";
    auto s = RunG4("logits --model " + dir + " --greedy 4 --decode-ids 11,12 --ids " + ids[i] + " --out " + solo_path);
    ASSERT_EQ(s.exit_code, 0) << s.all;
    auto solo = SafetensorsFile::Open(solo_path);
    ASSERT_TRUE(solo.ok());
    for (const char* name : {"logits", "ids", "greedy_ids", "greedy_logits", "decode_logits"}) {
      const TensorInfo* a = (*all)->Find(std::string(name) + "." + std::to_string(i));
      const TensorInfo* b = (*solo)->Find(name);
      ASSERT_TRUE(a && b) << name;
      ASSERT_EQ(a->shape, b->shape) << name;
      EXPECT_EQ(0, std::memcmp(a->data, b->data, a->nbytes)) << name << " of sequence " << i;
    }
  }
}

TEST(BenchCli, BatchReportsAggregateAndPerRowDecode) {
  auto r = RunG4("bench --model " + DemoModelDir() + " --prompt 8 --gen 4 --batch 3 --json --memcpy-mib 0");
  ASSERT_EQ(r.exit_code, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["batch"], 3);
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_NEAR(j["decode_tok_s"].get<double>(), 3 * j["decode_tok_s_per_row"].get<double>(),
              1e-6 * j["decode_tok_s"].get<double>());
  EXPECT_EQ(j["warmup_steps"], 2);  // the default: two untimed steps first
}

TEST(BenchCli, WarmupStepsGiveWayToTheContext) {
  // tiny-e-q4's context is 4096: a prompt of 4092 and 2 timed steps leave
  // room for one warm-up step, 4093 for none (and still run).
  const std::string model = testing::TestDataPath("models/tiny-e-q4");
  for (const int prompt : {4092, 4093}) {
    std::string cmd = "bench --model ";
    cmd += model;
    cmd += " --gen 2 --json --memcpy-mib 0 --backend cpu --prompt ";
    cmd += std::to_string(prompt);
    auto r = RunG4(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.all;
    EXPECT_EQ(nlohmann::json::parse(r.out)["warmup_steps"], prompt == 4092 ? 1 : 0) << prompt;
  }
}

TEST(BenchCli, WarmupStepsAreOptional) {
  for (int w : {0, 3}) {
    auto r = RunG4("bench --model " + DemoModelDir() + " --prompt 8 --gen 4 --batch 2 --json --memcpy-mib 0 --warmup " +
                   std::to_string(w));
    ASSERT_EQ(r.exit_code, 0) << r.all;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["warmup_steps"], w);
    EXPECT_EQ(j["gen_tokens"], 4);
    EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  }
}

}  // namespace
}  // namespace g4
