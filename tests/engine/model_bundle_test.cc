// The loader's errors: what LoadModelBundle and MakeBackend say about a
// missing directory, a missing or mismatched tokenizer, and unknown backends.
#include "engine/model_bundle.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/backend_factory.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

TEST(ModelBundle, MissingDirectoryIsNotFound) {
  auto b = LoadModelBundle(testing::MakeTempDir() + "/nothing-here", "cpu");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("no such model directory"), std::string::npos) << b.status().message();
}

TEST(ModelBundle, ModelWithoutTokenizerSaysHowToAddOne) {
  const std::string dir = testing::MakeTempDir() + "/m";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(testing::TestDataPath(std::string("models/tiny-e/") + f), dir + "/" + f);
  auto b = LoadModelBundle(dir, "cpu");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("tokenizer.json"), std::string::npos) << b.status().message();
}

TEST(ModelBundle, TokenizerLargerThanTheVocabularyIsRefused) {
  const std::string dir = testing::MakeTempDir() + "/m";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(testing::TestDataPath(std::string("models/tiny-e/") + f), dir + "/" + f);
  fs::copy_file(testing::TestDataPath("tokenizer/tokenizer.json"), dir + "/tokenizer.json");  // 262144 ids
  auto b = LoadModelBundle(dir, "cpu");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("vocabulary"), std::string::npos) << b.status().message();
}

TEST(ModelBundle, UnknownBackendsAreClearErrors) {
  auto tpu = MakeBackend("tpu");
  ASSERT_FALSE(tpu.ok());
  EXPECT_EQ(tpu.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tpu.status().message().find("cpu, cuda or auto"), std::string::npos);
  auto cpu = MakeBackend("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->name(), "cpu");
  auto any = MakeBackend("auto");
  EXPECT_TRUE(any.ok());
}

}  // namespace
}  // namespace g4
