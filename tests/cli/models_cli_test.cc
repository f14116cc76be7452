// `g4 models` and -m ORG/NAME through the binary, on a fake Hugging Face
// cache built here: what is listed (size, format, quantization, status), what
// is left out, and that a cached repo id runs exactly as its directory does.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fake_hf_cache.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
namespace fs = std::filesystem;
using nlohmann::json;
using testing::RunG4;

class ModelsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir() + "/hub";
    fs::create_directories(root_);
    testing::AddToFakeCache(root_, "testorg", "gemma-4-demo", "c0ffee1234", DemoModelDir());
    testing::AddToFakeCache(root_, "testorg", "tiny-e", "1111111", testing::TestDataPath("models/tiny-e"));
    const std::string tmp = testing::MakeTempDir();
    std::ofstream(tmp + "/config.json") << R"({"model_type": "llama", "hidden_size": 8})";
    testing::AddToFakeCache(root_, "otherorg", "llama-tiny", "2222222", tmp);
    const std::string broken = testing::MakeTempDir();
    fs::copy_file(DemoModelDir() + "/config.json", broken + "/config.json");
    fs::copy_file(DemoModelDir() + "/model.safetensors", broken + "/model-00001-of-00002.safetensors");
    std::ofstream(broken + "/model.safetensors.index.json")
        << R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})";
    testing::AddToFakeCache(root_, "testorg", "half-downloaded", "3333333", broken);
    setenv("HF_HUB_CACHE", root_.c_str(), 1);
  }
  void TearDown() override { unsetenv("HF_HUB_CACHE"); }

  // The listing's entry for `name`, or null.
  static json Entry(const json& listing, const std::string& name) {
    for (const json& m : listing["models"])
      if (m["name"] == name) return m;
    return nullptr;
  }

  std::string root_;
};

TEST_F(ModelsCli, ListsGemma4CheckpointsWithSizeFormatAndStatus) {
  const auto r = RunG4("models --json");
  ASSERT_EQ(r.exit_code, 0) << r.all;
  const json j = json::parse(r.out);
  EXPECT_EQ(fs::path(j["cache_roots"][0].get<std::string>()), fs::path(root_));
  const json demo = Entry(j, "testorg/gemma-4-demo");
  ASSERT_FALSE(demo.is_null()) << j.dump(1);
  EXPECT_EQ(demo["format"], "mlx");
  EXPECT_EQ(demo["quantization"].get<std::string>().rfind("4-bit g64", 0), 0u) << demo.dump();
  EXPECT_EQ(demo["bytes"].get<uint64_t>(), fs::file_size(DemoModelDir() + "/model.safetensors"));
  EXPECT_EQ(demo["status"], "ok");
  EXPECT_EQ(demo["commit"], "c0ffee1234");
  EXPECT_EQ(demo["revision"], "main");
  EXPECT_EQ(demo["layers"], 10);

  const json tiny = Entry(j, "testorg/tiny-e");
  ASSERT_FALSE(tiny.is_null());
  EXPECT_EQ(tiny["format"], "hf");
  EXPECT_EQ(tiny["quantization"], "none");
  EXPECT_NE(tiny["status"].get<std::string>().find("no tokenizer.json"), std::string::npos);

  const json broken = Entry(j, "testorg/half-downloaded");
  ASSERT_FALSE(broken.is_null());
  EXPECT_EQ(broken["status"], "incomplete download: model-00002-of-00002.safetensors missing");

  EXPECT_TRUE(Entry(j, "otherorg/llama-tiny").is_null());  // not Gemma 4
  const auto all = RunG4("models --json --all");
  const json other = Entry(json::parse(all.out), "otherorg/llama-tiny");
  ASSERT_FALSE(other.is_null());
  EXPECT_FALSE(other["gemma4"].get<bool>());

  // The table a person reads says the same.
  const auto table = RunG4("models");
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("testorg/gemma-4-demo"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("mlx"), std::string::npos);
  EXPECT_NE(table.out.find("incomplete download"), std::string::npos);
}

TEST_F(ModelsCli, ARepoIdRunsAsItsDirectoryDoes) {
  const std::string args = " 'What is a Python dictionary?' --temp 0 -n 16 -q";
  const auto by_dir = RunG4("generate " + DemoModelDir() + args);
  ASSERT_EQ(by_dir.exit_code, 0) << by_dir.all;
  for (const char* spec : {"testorg/gemma-4-demo", "testorg/gemma-4-DEMO", "testorg/gemma-4-demo@main",
                                  "testorg/gemma-4-demo@c0ffee1"}) {
    const auto by_id = RunG4("generate -m " + std::string(spec) + args);
    ASSERT_EQ(by_id.exit_code, 0) << spec << "\n" << by_id.all;
    EXPECT_EQ(by_id.out, by_dir.out) << spec;
  }
  const auto missing = RunG4("generate -m testorg/gemma-4-nothing hi");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.all.find("hf download testorg/gemma-4-nothing"), std::string::npos) << missing.all;
}

TEST_F(ModelsCli, NothingFoundSaysHowToGetAModel) {
  // An empty cache, and none of the other places either.
  const std::string empty = testing::MakeTempDir();
  const char* home = getenv("HOME");
  const std::string saved_home = home ? home : "";
  setenv("HF_HUB_CACHE", empty.c_str(), 1);
  setenv("HOME", empty.c_str(), 1);
  unsetenv("HF_HOME");
  unsetenv("XDG_CACHE_HOME");
  const auto r = RunG4("models");
  setenv("HOME", saved_home.c_str(), 1);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("No Gemma 4 checkpoints found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hf download"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace g4
