// End-to-end tests of `g4 logits`: parity with the transformers goldens
// through the real binary, and one clear error (non-zero exit, no crash) for
// every kind of bad input the foundation issue lists.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

using testing::RunG4;
using RunResult = testing::G4Run;

std::string Join(const TensorInfo* t) {
  std::string s;
  const auto* v = reinterpret_cast<const int32_t*>(t->data);
  for (int64_t i = 0; i < t->numel(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// The float32 fixture matches transformers to 1e-3. The 4-bit one runs its
// matrix products on int8-quantized activations (docs/cpu-kernels.md), so it
// is held to the reduced-precision envelope of tests/model/golden_test.cc
// (relative RMS under 0.1) and the same greedy ids.
TEST(LogitsCli, GreedyRunMatchesGolden) {
  for (const char* name : {"tiny-e", "tiny-moe-q4"}) {
    const bool quantized = std::string(name).ends_with("-q4");
    const std::string dir = testing::TestDataPath(std::string("models/") + name);
    auto golden = SafetensorsFile::Open(dir + "/golden.safetensors");
    ASSERT_TRUE(golden.ok());
    const TensorInfo* ids = (*golden)->Find("long.ids");
    const TensorInfo* gids = (*golden)->Find("long.greedy_ids");
    const std::string out = testing::MakeTempDir() + "/out.safetensors";
    RunResult r = RunG4("logits --model " + dir + " --ids " + Join(ids) + " --greedy " +
                      std::to_string(gids->numel()) + " --decode-ids " + Join(gids) + " --chunk 5 --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.all;
    auto got = SafetensorsFile::Open(out);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (auto [mine, theirs] : {std::pair{"logits", "long.logits"}, std::pair{"greedy_logits", "long.greedy_logits"}}) {
      const TensorInfo* a = (*got)->Find(mine);
      const TensorInfo* b = (*golden)->Find(theirs);
      ASSERT_TRUE(a && b) << mine;
      ASSERT_EQ(a->shape, b->shape) << mine;
      const auto* want = reinterpret_cast<const float*>(b->data);
      const auto* have = reinterpret_cast<const float*>(a->data);
      if (quantized) {
        EXPECT_LT(testing::RelativeRms(want, have, b->numel()), 0.1) << name << " " << mine;
        continue;
      }
      auto m = testing::Compare(want, have, b->numel(), 1e-3);
      EXPECT_TRUE(m.ok) << name << " " << mine << ": " << m.ToString();
    }
    const TensorInfo* my_ids = (*got)->Find("greedy_ids");
    ASSERT_NE(my_ids, nullptr);
    EXPECT_EQ(Join(my_ids), Join(gids));
    // Teacher forcing the greedy ids reproduces greedy rows 1.. (row 0 is the prompt's last).
    const TensorInfo* dec = (*got)->Find("decode_logits");
    const TensorInfo* greedy = (*golden)->Find("long.greedy_logits");
    ASSERT_NE(dec, nullptr);
    const int64_t V = dec->shape[1];
    const auto* want = reinterpret_cast<const float*>(greedy->data) + V;
    const auto* have = reinterpret_cast<const float*>(dec->data);
    if (quantized) {
      EXPECT_LT(testing::RelativeRms(want, have, (gids->numel() - 1) * V), 0.1) << name;
      continue;
    }
    auto m = testing::Compare(want, have, (gids->numel() - 1) * V, 1e-3);
    EXPECT_TRUE(m.ok) << m.ToString();
  }
}

// Copies tiny-e into a temp dir so a test can damage one file.
std::string CopyModel(const std::string& name = "tiny-e") {
  const std::string dst = testing::MakeTempDir() + "/model";
  fs::copy(testing::TestDataPath("models/" + name), dst, fs::copy_options::recursive);
  return dst;
}

void ExpectCleanFailure(const std::string& model_dir, const std::string& needle, const std::string& ids = "1,2,3") {
  RunResult r = RunG4("logits --model " + model_dir + " --ids " + ids + " --out " + testing::MakeTempDir() + "/o");
  EXPECT_FALSE(r.signaled) << r.all;
  EXPECT_EQ(r.exit_code, 1) << r.all;
  EXPECT_NE(r.all.find(needle), std::string::npos) << "want '" << needle << "' in: " << r.all;
  // One line: a message, not a dump.
  EXPECT_LE(std::count(r.all.begin(), r.all.end(), '\n'), 1) << r.all;
}

void Truncate(const std::string& path, size_t size) { fs::resize_file(path, size); }

void PatchHeader(const std::string& path, const std::string& from, const std::string& to) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  f.read(header.data(), n);
  const size_t at = header.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  ASSERT_EQ(from.size(), to.size());
  header.replace(at, from.size(), to);
  f.seekp(8);
  f.write(header.data(), n);
}

TEST(LogitsCli, CorruptInputsFailCleanly) {
  {  // truncated file
    const std::string d = CopyModel();
    Truncate(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") / 2);
    ExpectCleanFailure(d, "safetensors");
  }
  {  // header length past the end
    const std::string d = CopyModel();
    std::fstream f(d + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t huge = 1ull << 40;
    f.write(reinterpret_cast<const char*>(&huge), 8);
    f.close();
    ExpectCleanFailure(d, "header");
  }
  {  // header not JSON
    const std::string d = CopyModel();
    PatchHeader(d + "/model.safetensors", "{\"", "{{");
    ExpectCleanFailure(d, "JSON");
  }
  {  // shape disagreeing with bytes
    const std::string d = CopyModel();
    PatchHeader(d + "/model.safetensors", "\"shape\":[128]", "\"shape\":[127]");
    ExpectCleanFailure(d, "safetensors");
  }
  {  // config not JSON
    const std::string d = CopyModel();
    std::ofstream(d + "/config.json") << "{ not json";
    ExpectCleanFailure(d, "config");
  }
  {  // config naming more layers than the weights hold
    // (tiny-dense: no PLE table whose shape would give it away first)
    const std::string d = CopyModel("tiny-dense");
    std::ifstream in(d + "/config.json");
    nlohmann::json c = nlohmann::json::parse(in);
    in.close();
    const int n = c["num_hidden_layers"];
    c["num_hidden_layers"] = n + 1;
    c["layer_types"].push_back("full_attention");
    std::ofstream(d + "/config.json") << c.dump(2);
    ExpectCleanFailure(d, "missing tensor model.layers." + std::to_string(n) + ".");
  }
  {  // missing tensor
    const std::string d = CopyModel();
    PatchHeader(d + "/model.safetensors", "model.norm.weight", "model.norm.weighx");
    ExpectCleanFailure(d, "missing tensor model.norm.weight");
  }
  ExpectCleanFailure(testing::TestDataPath("models/tiny-e"), "outside the vocabulary", "1,2,512");
  ExpectCleanFailure("/nonexistent/model/dir", "/nonexistent/model/dir");
}

TEST(LogitsCli, UsageErrorsExitTwo) {
  EXPECT_EQ(RunG4("logits --ids 1,2").exit_code, 2);
  EXPECT_EQ(RunG4("no-such-command").exit_code, 2);
}

}  // namespace
}  // namespace g4
