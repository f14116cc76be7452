// .g4kv persistence of a pool sequence: bit-exact round trips (also into a
// pool of another block size), byte-identical re-saves, and clean refusal of
// files from another model, tokenizer or scheme, flipped bytes and
// truncation, with the pool left as it was. Also CRC32C and the model
// fingerprint the files are keyed by.
#include "kv/kv_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/gemma4_weights.h"
#include "io/safetensors.h"
#include "kv/checksum.h"
#include "kv/model_fingerprint.h"
#include "kv_test_util.h"

namespace g4 {
namespace {

using testing::Capacity;
using testing::MakeConfig;
using testing::MakePool;
using testing::MustParseScheme;
using testing::SynthConfig;
using testing::WriteStep;

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);  // RFC 3720 / iSCSI check value
  EXPECT_EQ(Crc32c("", 0), 0u);
  const std::string s = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t cut = 0; cut <= s.size(); ++cut)
    EXPECT_EQ(Crc32c(s.data() + cut, s.size() - cut, Crc32c(s.data(), cut)), Crc32c(s.data(), s.size()));
}

TEST(ModelFingerprint, DiffersForOtherWeightsOfTheSameConfig) {
  auto fingerprint = [](const std::string& name) {
    const std::string dir = testing::TestDataPath("models/" + name);
    auto config = LoadGemma4Config(dir);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto ckpt = Checkpoint::Open(dir);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    auto weights = Gemma4Weights::Load(*config, std::move(ckpt).value());
    EXPECT_TRUE(weights.ok()) << weights.status().ToString();
    return ModelFingerprint(*config, **weights);
  };
  const std::string e = fingerprint("tiny-e"), q4 = fingerprint("tiny-e-q4");
  EXPECT_EQ(e.size(), 16u);
  EXPECT_EQ(e, fingerprint("tiny-e"));
  EXPECT_NE(e, q4);
  EXPECT_NE(e, fingerprint("tiny-e2"));
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

const KvFileIdentity kIdentity{"0123456789abcdef", "tok-1"};

std::vector<int32_t> Ids(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = static_cast<int32_t>(rng() % 512);
  return ids;
}

bool SameExport(const std::vector<KvPool::LayerRecords>& a, const std::vector<KvPool::LayerRecords>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].layer != b[i].layer || a[i].signature != b[i].signature || a[i].first_token != b[i].first_token ||
        a[i].records != b[i].records)
      return false;
  return true;
}

class KvFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = MakeCpuBackend();
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
  }
  // A sequence of `length` tokens written in scheduler-sized chunks (so a
  // delayed scheme converts on the way).
  void Fill(KvPool& pool, KvSeq& seq, int64_t length, uint32_t content) {
    while (seq.length() < length) {
      ASSERT_TRUE(pool.Maintain(seq).ok());
      const int64_t n = std::min({int64_t{9}, length - seq.length(), pool.max_append_tokens(seq)});
      ASSERT_TRUE(WriteStep(pool, {&seq}, {n}, {content}).ok());
    }
  }
  // A new sequence of `length` tokens (content `content`) saved to
  // dir_/seq.g4kv with token ids Ids(length, ids_seed); it stays resident.
  struct Saved {
    KvSeq seq;
    std::string path;
  };
  Saved SaveNewSequence(KvPool& pool, int64_t length, uint32_t content, uint32_t ids_seed) {
    Saved s{pool.NewSequence(), dir_ + "/seq.g4kv"};
    Fill(pool, s.seq, length, content);
    const Status saved = SaveKvFile(s.path, pool, s.seq, kIdentity, Ids(length, ids_seed));
    EXPECT_TRUE(saved.ok()) << saved.ToString();
    return s;
  }
  std::unique_ptr<Backend> backend_;
  std::string dir_;
};

TEST_F(KvFileTest, RoundTripsBitExactlyIntoAnyBlockSize) {
  const Gemma4Config config = MakeConfig();
  for (const char* spec : {"plain", "plain:bf16", "affine:4:32", "turbo:k8v3", "affine:4@24", "turbo:k8v3@24",
                           "turbo:k4v3@100", "sliding=affine:8,full=turbo:k8v3@30"}) {
    SCOPED_TRACE(spec);
    auto pool = MakePool(config, spec, *backend_, Capacity(50, 16));
    ASSERT_NE(pool, nullptr);
    KvSeq seq = pool->NewSequence();
    Fill(*pool, seq, 43, 5);  // sliding blocks released; @24 converted, @100 not
    const auto ids = Ids(43, 1);
    const std::string path = dir_ + "/seq.g4kv";
    ASSERT_TRUE(SaveKvFile(path, *pool, seq, kIdentity, ids).ok());
    for (int bs : {16, 7}) {
      auto other = MakePool(config, spec, *backend_, Capacity(50, bs));
      ASSERT_NE(other, nullptr);
      for (KvPool* into : {pool.get(), other.get()}) {
        auto loaded = LoadKvFile(path, *into, kIdentity);
        ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
        EXPECT_EQ(loaded->tokens, ids);
        EXPECT_EQ(loaded->seq.length(), 43);
        for (KvGroup g : {KvGroup::kFull, KvGroup::kSliding})
          EXPECT_EQ(into->converted_at(loaded->seq, g), pool->converted_at(seq, g));
        EXPECT_EQ(into->minimum_reusable_offset(loaded->seq), pool->minimum_reusable_offset(seq));
        EXPECT_TRUE(SameExport(into->Export(loaded->seq), pool->Export(seq))) << "block size " << bs;
        // Re-saving reproduces the file byte for byte, whatever the block size.
        const std::string again = dir_ + "/again.g4kv";
        ASSERT_TRUE(SaveKvFile(again, *into, loaded->seq, kIdentity, ids).ok());
        EXPECT_EQ(ReadAll(again), ReadAll(path));
        // Both continue identically.
        KvSeq original = std::move(pool->Fork(seq, 43).value());
        Fill(*pool, original, 60, 6);
        Fill(*into, loaded->seq, 60, 6);
        EXPECT_TRUE(SameExport(into->Export(loaded->seq), pool->Export(original)));
      }
    }
  }
}

TEST_F(KvFileTest, FilesFromAnotherModelTokenizerOrSchemeAreRefusedAndThePoolIsUntouched) {
  const Gemma4Config config = MakeConfig();
  auto pool = MakePool(config, "affine:8@20", *backend_, Capacity(40));
  ASSERT_NE(pool, nullptr);
  const Saved saved = SaveNewSequence(*pool, 30, 1, 2);
  const std::string& path = saved.path;
  SynthConfig wide;
  wide.num_kv_heads = 4;
  auto other_geometry = MakePool(MakeConfig(wide), "affine:8@20", *backend_, Capacity(40));
  auto other_scheme = MakePool(config, "affine:4@20", *backend_, Capacity(40));
  auto same = MakePool(config, "affine:8@20", *backend_, Capacity(40));
  struct Case {
    KvPool* pool;
    KvFileIdentity id;
    const char* expect;
  };
  const Case cases[] = {
      {pool.get(), {"fedcba9876543210", "tok-1"}, "saved for model"},
      {pool.get(), {kIdentity.model_fingerprint, "tok-2"}, "saved with tokenizer"},
      {other_scheme.get(), kIdentity, "saved with KV scheme"},
      // Same fingerprint claimed, other geometry: the records do not fit.
      {other_geometry.get(), kIdentity, "bytes of records"},
  };
  for (const Case& c : cases) {
    KvSeq resident = c.pool->NewSequence();
    Fill(*c.pool, resident, 17, 9);
    const size_t used = c.pool->used_bytes();
    const auto before = c.pool->Export(resident);
    auto r = LoadKvFile(path, *c.pool, c.id);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << "the error names the file";
    EXPECT_EQ(c.pool->used_bytes(), used);
    EXPECT_TRUE(SameExport(c.pool->Export(resident), before));
  }
  EXPECT_TRUE(LoadKvFile(path, *same, kIdentity).ok());
  // A pool with no room refuses cleanly too.
  auto tiny = MakePool(config, "affine:8@20", *backend_, Capacity(1));
  auto r = LoadKvFile(path, *tiny, kIdentity);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_EQ(tiny->used_bytes(), 0u);
}

TEST_F(KvFileTest, CorruptAndTruncatedFilesAreRefused) {
  const Gemma4Config config = MakeConfig();
  auto pool = MakePool(config, "turbo:k8v3@16", *backend_, Capacity(40));
  ASSERT_NE(pool, nullptr);
  const Saved saved = SaveNewSequence(*pool, 35, 3, 4);
  const std::string& path = saved.path;
  const std::string good = ReadAll(path);
  ASSERT_GT(good.size(), 3 * 4096u);
  // Which bytes a checksum covers: preamble fields, every layer's records, the header.
  std::vector<bool> covered(good.size(), false);
  for (size_t i = 0; i < 44; ++i) covered[i] = true;
  uint64_t header_offset = 0;
  std::memcpy(&header_offset, good.data() + 16, 8);
  for (size_t i = header_offset; i < good.size(); ++i) covered[i] = true;
  const auto header = nlohmann::json::parse(good.substr(header_offset));
  EXPECT_EQ(header.at("version").get<int>(), 2);
  for (const auto& layer : header.at("layers"))
    for (uint64_t i = 0; i < layer.at("bytes").get<uint64_t>(); ++i) covered[layer.at("offset").get<uint64_t>() + i] = true;

  KvSeq resident = pool->NewSequence();
  Fill(*pool, resident, 11, 8);
  const size_t used = pool->used_bytes();
  const auto resident_before = pool->Export(resident);
  const std::string bad = dir_ + "/bad.g4kv";
  auto load = [&](const std::string& bytes) {
    WriteAll(bad, bytes);
    return LoadKvFile(bad, *pool, kIdentity);
  };
  auto expect_refused = [&](const std::string& bytes, const char* what, const std::string& label) {
    auto r = load(bytes);
    ASSERT_FALSE(r.ok()) << label;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << label << ": " << r.status().ToString();
    EXPECT_EQ(pool->used_bytes(), used) << label;
  };
  std::string b = good;
  b[4096 + 77] ^= 0x10;
  expect_refused(b, "checksum mismatch", "records byte");
  b = good;
  b[good.size() - 20] ^= 0x01;
  expect_refused(b, "header checksum", "header byte");
  b = good;
  b[17] ^= 0x01;
  expect_refused(b, "preamble checksum", "preamble byte");
  b = good;
  b[0] = 'X';
  expect_refused(b, "bad magic", "magic");
  // A flipped byte anywhere a checksum covers is refused (every covered
  // byte of the preamble and header region, a sample of the records).
  std::mt19937 rng(8);
  int flipped = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    if (!covered[at] || (at >= 4096 && at < header_offset && rng() % 64 != 0)) continue;
    b = good;
    b[at] ^= static_cast<char>(1 << (rng() % 8));
    auto r = load(b);
    ASSERT_FALSE(r.ok()) << "a flipped byte at " << at << " of " << good.size() << " was accepted";
    ++flipped;
  }
  EXPECT_GT(flipped, 200);
  for (size_t keep : {good.size() - 1, static_cast<size_t>(header_offset), good.size() / 2, size_t{100}, size_t{10},
                      size_t{0}})
    expect_refused(good.substr(0, keep), "truncated", "kept " + std::to_string(keep) + " bytes");
  expect_refused(good + "x", "header says", "appended byte");
  EXPECT_EQ(pool->used_bytes(), used);
  EXPECT_TRUE(SameExport(pool->Export(resident), resident_before));
  EXPECT_TRUE(LoadKvFile(path, *pool, kIdentity).ok());  // the original is still good
}

// Rewrites the header JSON and every checksum that covers it: files that
// are well formed but say something the pool must refuse.
std::string WithHeader(const std::string& file, const std::function<void(nlohmann::json&)>& edit) {
  uint64_t offset = 0;
  std::memcpy(&offset, file.data() + 16, 8);
  nlohmann::json h = nlohmann::json::parse(file.substr(offset));
  edit(h);
  const std::string text = h.dump();
  std::string out = file.substr(0, offset) + text;
  const uint64_t n = text.size();
  std::memcpy(out.data() + 24, &n, 8);
  const uint32_t crc = Crc32c(text.data(), text.size());
  std::memcpy(out.data() + 32, &crc, 4);
  const uint32_t pre = Crc32c(out.data(), 40);
  std::memcpy(out.data() + 40, &pre, 4);
  return out;
}

TEST_F(KvFileTest, WellFormedFilesWithImpossibleContentsAreRefused) {
  const Gemma4Config config = MakeConfig();
  auto pool = MakePool(config, "affine:8@20", *backend_, Capacity(40));
  ASSERT_NE(pool, nullptr);
  const Saved saved = SaveNewSequence(*pool, 30, 1, 2);
  const std::string& path = saved.path;
  const std::string good = ReadAll(path);
  ASSERT_TRUE(LoadKvFile(path, *pool, kIdentity).ok()) << "the rewrite itself is sound";
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    const char* expect;
  };
  const Case cases[] = {
      {[](nlohmann::json& h) { h["tokens"][3] = 512; }, "outside the vocabulary"},
      {[](nlohmann::json& h) { h["length"] = 29; }, "token ids"},
      {[](nlohmann::json& h) { h["converted_at"][0] = 10; }, "converted at 10"},      // before its boundary
      {[](nlohmann::json& h) { h["converted_at"][1] = -1; }, "records are kv:affine"},  // says plain, holds affine
      {[](nlohmann::json& h) { h["layers"][0]["signature"] = "kv:affine:4:32"; }, "records are kv:affine:4:32"},
      {[](nlohmann::json& h) { h["layers"][0]["first_token"] = 25; }, "bytes for"},
      {[](nlohmann::json& h) { h["layers"].erase(1); }, "layers that own K/V"},
      {[](nlohmann::json& h) {
         h["layers"][0]["layer"] = 1;
         h["layers"][1]["layer"] = 0;
       },
       "expected layer 0"},
      {[](nlohmann::json& h) { h["version"] = 1; }, "disagree with the preamble"},
      {[](nlohmann::json& h) { h.erase("converted_at"); }, "header"},
  };
  const size_t used = pool->used_bytes();
  for (const Case& c : cases) {
    const std::string bad = dir_ + "/bad.g4kv";
    WriteAll(bad, WithHeader(good, c.edit));
    auto r = LoadKvFile(bad, *pool, kIdentity);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
    EXPECT_EQ(pool->used_bytes(), used);
  }
  // A version-1 file (the per-layer cache format) is named as such.
  std::string v1 = good;
  const uint32_t one = 1;
  std::memcpy(v1.data() + 8, &one, 4);
  const uint32_t pre = Crc32c(v1.data(), 40);
  std::memcpy(v1.data() + 40, &pre, 4);
  WriteAll(dir_ + "/v1.g4kv", v1);
  auto r = LoadKvFile(dir_ + "/v1.g4kv", *pool, kIdentity);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
}

TEST_F(KvFileTest, FailedSaveLeavesNoFileBehind) {
  auto pool = MakePool(MakeConfig(), "plain", *backend_, Capacity(10));
  ASSERT_NE(pool, nullptr);
  KvSeq seq = pool->NewSequence();
  Fill(*pool, seq, 12, 1);
  const auto ids = Ids(12, 3);
  EXPECT_FALSE(SaveKvFile(dir_ + "/missing-dir/x.g4kv", *pool, seq, kIdentity, ids).ok());
  const Status wrong = SaveKvFile(dir_ + "/x.g4kv", *pool, seq, kIdentity, {1, 2, 3});
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "no file or temporary left";
}

// The write policy (core/file_write.h): a save never renames over a symlink
// (which would replace the link), a FIFO or a device; a regular file is
// replaced, and nothing is left behind when the save is refused.
TEST_F(KvFileTest, SaveRefusesTargetsThatAreNotRegularFiles) {
  auto pool = MakePool(MakeConfig(), "plain", *backend_, Capacity(10));
  ASSERT_NE(pool, nullptr);
  KvSeq seq = pool->NewSequence();
  Fill(*pool, seq, 12, 1);
  const auto ids = Ids(12, 3);
  const std::string real = dir_ + "/real.g4kv";
  WriteAll(real, "keep me");
  ASSERT_EQ(::symlink(real.c_str(), (dir_ + "/link.g4kv").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir_ + "/fifo.g4kv").c_str(), 0600), 0);
  for (const std::string name : {"link.g4kv", "fifo.g4kv"}) {
    const Status s = SaveKvFile(dir_ + "/" + name, *pool, seq, kIdentity, ids);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name << ": " << s.ToString();
    EXPECT_EQ(s.message().rfind("[kv] ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("replaces only regular files"), std::string::npos) << s.message();
  }
  EXPECT_EQ(ReadAll(real), "keep me") << "written through the symlink";
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ + "/link.g4kv"));
  const Status dev = SaveKvFile("/dev/null", *pool, seq, kIdentity, ids);
  EXPECT_FALSE(dev.ok());
  // A regular file is replaced, and loads.
  ASSERT_TRUE(SaveKvFile(real, *pool, seq, kIdentity, ids).ok());
  auto loaded = LoadKvFile(real, *pool, kIdentity);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tokens, ids);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) entries += !e.path().empty();
  EXPECT_EQ(entries, 3u) << "a temporary file was left behind";
}

}  // namespace
}  // namespace g4
