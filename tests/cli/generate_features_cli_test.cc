// Library features on `g4 generate`, checked through the binary against
// references computed here: --logprobs against the log-softmax of `g4
// logits` rows, --logit-bias and XTC against what the sampler's rules allow,
// --prompt-cache against a run without it, -c against the token counts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
namespace fs = std::filesystem;
using nlohmann::json;
using testing::RunG4;

json GenerateJson(const std::string& args) {
  const auto r = RunG4("generate " + DemoModelDir() + " " + args + " -q");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.all;
  return json::parse(r.out, nullptr, false);
}

TEST(GenerateCli, LogprobsAreTheLogSoftmaxOfTheModelsLogits) {
  const std::string text = "The package manager downloads the files";
  const auto ids = RunG4("tokenize " + DemoModelDir() + " --bos --ids-only -q '" + text + "'");
  ASSERT_EQ(ids.exit_code, 0) << ids.all;
  std::string id_list = ids.out.substr(1, ids.out.find(']') - 1);
  std::erase(id_list, ' ');
  const int steps = 4, top = 5;
  const std::string out = testing::MakeTempDir() + "/l.safetensors";
  const auto logits = RunG4("logits " + DemoModelDir() + " --ids " + id_list + " --greedy " + std::to_string(steps) +
                            " --out " + out);
  ASSERT_EQ(logits.exit_code, 0) << logits.all;
  auto file = SafetensorsFile::Open(out);
  ASSERT_TRUE(file.ok());
  const TensorInfo* rows = (*file)->Find("greedy_logits");
  ASSERT_NE(rows, nullptr);
  const int64_t V = rows->shape[1];

  const json j = GenerateJson("--raw '" + text + "' --temp 0 --repeat-penalty 1 --kv plain -n " +
                              std::to_string(steps) + " --logprobs " + std::to_string(top));
  ASSERT_EQ(j["logprobs"].size(), static_cast<size_t>(steps)) << j.dump();
  for (int s = 0; s < steps; ++s) {
    const float* row = reinterpret_cast<const float*>(rows->data) + s * V;
    double max = row[0];
    for (int64_t v = 0; v < V; ++v) max = std::max<double>(max, row[v]);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - max);
    const double lse = max + std::log(sum);
    const json& lp = j["logprobs"][s];
    const int chosen = lp["id"];
    EXPECT_NEAR(lp["logprob"].get<double>(), row[chosen] - lse, 1e-4) << "step " << s;
    ASSERT_EQ(lp["top"].size(), static_cast<size_t>(top));
    // Greedy: the chosen token is the likeliest, listed first; the list descends.
    EXPECT_EQ(lp["top"][0]["id"].get<int>(), chosen);
    for (int k = 0; k < top; ++k) {
      const int id = lp["top"][k]["id"];
      EXPECT_NEAR(lp["top"][k]["logprob"].get<double>(), row[id] - lse, 1e-4);
      if (k) {
        EXPECT_LE(lp["top"][k]["logprob"].get<double>(), lp["top"][k - 1]["logprob"].get<double>());
      }
    }
  }
}

TEST(GenerateCli, LogitBiasForcesOrBansTokens) {
  const json plain = GenerateJson("'Hi' --temp 0 -n 3 --logprobs 0");
  const int first = plain["logprobs"][0]["id"];
  const json banned = GenerateJson("'Hi' --temp 0 -n 3 --logprobs 0 --logit-bias " + std::to_string(first) + "=-inf");
  EXPECT_NE(banned["logprobs"][0]["id"].get<int>(), first);
  const json forced = GenerateJson("'Hi' --temp 0 -n 5 --logprobs 0 --logit-bias 300=100");
  ASSERT_EQ(forced["logprobs"].size(), 5u);
  for (const json& lp : forced["logprobs"]) EXPECT_EQ(lp["id"].get<int>(), 300);
}

TEST(GenerateCli, XtcNeverPicksATopChoiceButTheLeastLikelyOfThem) {
  const double threshold = 0.05;
  const json j = GenerateJson("'Write about packages.' --temp 1 --top-k 0 --top-p 1 --min-p 0 --seed 5 -n 48 "
                              "--logprobs 20 --xtc-probability 1 --xtc-threshold " + std::to_string(threshold));
  int applied = 0;
  for (const json& lp : j["logprobs"]) {
    std::vector<int> above;  // likeliest first
    for (const json& t : lp["top"])
      if (std::exp(t["logprob"].get<double>()) > threshold) above.push_back(t["id"]);
    // XTC never removes a line break (nor a stop id, which is not listed).
    if (above.size() < 2 || lp["token"] == "\n") continue;
    ++applied;
    const int chosen = lp["id"];
    for (size_t k = 0; k + 1 < above.size(); ++k) EXPECT_NE(chosen, above[k]) << lp.dump();
  }
  EXPECT_GT(applied, 0) << "no step had two tokens above the threshold: the check checked nothing";
  // Without XTC the same seed does pick top choices.
  const json off = GenerateJson("'Write about packages.' --temp 1 --top-k 0 --top-p 1 --min-p 0 --seed 5 -n 48 "
                                "--logprobs 20");
  EXPECT_NE(off["text"], j["text"]);
}

TEST(GenerateCli, PromptCacheIsReusedWhenThePromptExtendsIt) {
  const std::string cache = testing::MakeTempDir() + "/p.g4kv";
  const std::string a = "The package manager downloads the files";
  const std::string b = a + " and checks their signatures";
  const json first = GenerateJson("--raw '" + a + "' --temp 0 -n 8 --json --prompt-cache " + cache);
  EXPECT_EQ(first["cached_tokens"], 0);
  ASSERT_TRUE(fs::exists(cache));
  const json second = GenerateJson("--raw '" + b + "' --temp 0 -n 8 --json --prompt-cache " + cache);
  // Everything of the first prompt but its last token was cached (BOS included).
  EXPECT_EQ(second["cached_tokens"].get<int>(), first["prompt_tokens"].get<int>() - 1);
  const json fresh = GenerateJson("--raw '" + b + "' --temp 0 -n 8 --json");
  EXPECT_EQ(second["text"], fresh["text"]);
  // Same prompt again: all but the last token come from the file.
  const json third = GenerateJson("--raw '" + b + "' --temp 0 -n 8 --json --prompt-cache " + cache);
  EXPECT_EQ(third["cached_tokens"].get<int>(), second["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(third["text"], fresh["text"]);
  // A file of another KV scheme is not used, said so, and replaced.
  const auto other = RunG4("generate " + DemoModelDir() + " --raw '" + b + "' --temp 0 -n 8 --json --kv affine:8 "
                           "--prompt-cache " + cache);
  ASSERT_EQ(other.exit_code, 0) << other.all;
  EXPECT_NE(other.all.find("prompt cache not used"), std::string::npos) << other.all;
  EXPECT_EQ(json::parse(other.out)["cached_tokens"], 0);
}

TEST(GenerateCli, ContextSizeBoundsPromptAndAnswer) {
  const json j = GenerateJson("'What is a Python dictionary?' --temp 0 -n 100 --json");
  const int prompt = j["prompt_tokens"];
  const json bounded = GenerateJson("'What is a Python dictionary?' --temp 0 -n 100 --json -c " +
                                    std::to_string(prompt + 3));
  EXPECT_EQ(bounded["completion_tokens"].get<int>(), 3);
  EXPECT_EQ(bounded["finish_reason"], "length");
  const auto over = RunG4("generate " + DemoModelDir() + " 'What is a Python dictionary?' -c " + std::to_string(prompt));
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.all.find("--ctx-size"), std::string::npos) << over.all;
}

TEST(GenerateCli, PromptFromAFileEqualsTheArgument) {
  const std::string file = testing::MakeTempDir() + "/prompt.txt";
  std::ofstream(file) << "How do I read a file?";
  const json a = GenerateJson("'How do I read a file?' --temp 0 -n 10 --json");
  const json b = GenerateJson("-f " + file + " --temp 0 -n 10 --json");
  EXPECT_EQ(a["text"], b["text"]);
  EXPECT_EQ(a["prompt_tokens"], b["prompt_tokens"]);
}

}  // namespace
}  // namespace g4
