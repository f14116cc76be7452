// Saving and restoring a sequence's caches: bit-exact continuation for every
// mode, checksums, and refusal of files from another model, tokenizer or
// scheme, flipped bytes and truncation, with the caller's state untouched.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "backend/ops.h"
#include "kv/checksum.h"
#include "kv/kv_file.h"
#include "kv/model_fingerprint.h"
#include "kv/sequence_kv.h"
#include "model/gemma4_model.h"
#include "test_util.h"

namespace g4 {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);  // RFC 3720 / iSCSI check value
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Incremental == one shot, at any split.
  const std::string s = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t cut = 0; cut <= s.size(); ++cut)
    EXPECT_EQ(Crc32c(s.data() + cut, s.size() - cut, Crc32c(s.data(), cut)), Crc32c(s.data(), s.size()));
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

class PersistenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ops_ = MakeCpuOps();
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
  }
  std::unique_ptr<Gemma4Model> Load(const std::string& name) {
    auto m = Gemma4Model::Load(testing::TestDataPath("models/" + name), ops_.get());
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }
  static std::vector<int32_t> Ids(int n, uint32_t seed, int vocab) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (auto& t : ids) t = static_cast<int32_t>(rng() % vocab);
    return ids;
  }
  static KvScheme Scheme(const std::string& spec) {
    auto s = KvScheme::Parse(spec);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return *s;
  }
  static KvFileIdentity Identity(const Gemma4Model& m) {
    return {ModelFingerprint(m.config(), m.weights()), "tok-test"};
  }
  // Feeds ids through kv: a prefill chunk of `head`, then one token at a time.
  static std::vector<float> Run(Gemma4Model& m, SequenceKv& kv, const std::vector<int32_t>& ids, size_t head) {
    const int64_t V = m.vocab_size();
    std::vector<float> logits(ids.size() * V);
    size_t i = 0;
    if (head > 0) {
      EXPECT_TRUE(m.ForwardChunked(ids.data(), head, head, kv, logits.data(), true).ok());
      i = head;
    }
    for (; i < ids.size(); ++i) EXPECT_TRUE(m.Forward(&ids[i], 1, kv, logits.data() + i * V, false).ok());
    return logits;
  }
  // A saved file for tiny-e, plain scheme, 30 tokens.
  std::string SavedFile(Gemma4Model& m, const std::string& spec = "plain") {
    auto kv = SequenceKv::Make(m.config(), Scheme(spec));
    const auto ids = Ids(30, 5, m.vocab_size());
    Run(m, **kv, ids, 20);
    const std::string path = dir_ + "/saved.g4kv";
    const Status s = SaveKvFile(path, **kv, Identity(m), ids);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return path;
  }

  std::unique_ptr<Ops> ops_;
  std::string dir_;
};

TEST_F(PersistenceTest, RestoredCachesContinueBitIdenticallyInEveryMode) {
  for (const char* name : {"tiny-e", "tiny-moe-q4"}) {  // KV sharing; MoE with affine weights
    auto m = Load(name);
    const int64_t V = m->vocab_size();
    for (const char* spec : {"plain", "affine:8", "affine:4", "affine:4:32", "turbo:k8v3", "turbo:k4v3",
                             "affine:4@24", "turbo:k8v3@24", "turbo:k4v3@100", "sliding=affine:8,full=turbo:k8v3@30"}) {
      const KvScheme scheme = Scheme(spec);
      auto live = SequenceKv::Make(m->config(), scheme);
      ASSERT_TRUE(live.ok()) << live.status().ToString();
      const auto ids = Ids(50, 17, m->vocab_size());
      const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 35), rest(ids.begin() + 35, ids.end());
      Run(*m, **live, prefix, 20);  // rings have wrapped; delayed @24 converted, @100 not
      const std::string path = dir_ + "/" + std::string(name) + ".g4kv";
      ASSERT_TRUE(SaveKvFile(path, **live, Identity(*m), prefix).ok()) << spec;
      auto loaded = LoadKvFile(path, m->config(), scheme, Identity(*m));
      ASSERT_TRUE(loaded.ok()) << spec << ": " << loaded.status().ToString();
      EXPECT_EQ(loaded->tokens, prefix);
      EXPECT_EQ(loaded->kv->position(), 35);
      EXPECT_EQ(loaded->kv->allocated_bytes(), (*live)->allocated_bytes()) << spec;
      EXPECT_EQ(loaded->kv->minimum_reusable_offset(), (*live)->minimum_reusable_offset()) << spec;
      const auto a = Run(*m, **live, rest, 0), b = Run(*m, *loaded->kv, rest, 0);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), rest.size() * V * sizeof(float)), 0) << name << " " << spec;
      // Saving the restored state reproduces the file byte for byte.
      auto again = LoadKvFile(path, m->config(), scheme, Identity(*m));
      ASSERT_TRUE(again.ok());
      const std::string path2 = dir_ + "/again.g4kv";
      ASSERT_TRUE(SaveKvFile(path2, *again->kv, Identity(*m), prefix).ok());
      EXPECT_EQ(ReadAll(path), ReadAll(path2)) << spec;
    }
  }
}

TEST_F(PersistenceTest, FilesFromAnotherModelTokenizerOrSchemeAreRefused) {
  auto e = Load("tiny-e");
  auto e2 = Load("tiny-e2");
  auto q4 = Load("tiny-e-q4");
  const std::string path = SavedFile(*e);
  EXPECT_NE(Identity(*e).model_fingerprint, Identity(*q4).model_fingerprint);  // same config, other weights
  struct Case {
    const Gemma4Model* model;
    std::string spec;
    KvFileIdentity id;
    const char* expect;
  };
  const Case cases[] = {
      {e2.get(), "plain", Identity(*e2), "saved for model"},
      {q4.get(), "plain", Identity(*q4), "saved for model"},
      {e.get(), "plain", {Identity(*e).model_fingerprint, "another-tokenizer"}, "saved with tokenizer"},
      {e.get(), "affine:4", Identity(*e), "saved with KV scheme"},
      {e.get(), "plain@5", Identity(*e), nullptr},  // plain@N is plain: accepted
  };
  for (const Case& c : cases) {
    auto r = LoadKvFile(path, c.model->config(), Scheme(c.spec), c.id);
    if (!c.expect) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      continue;
    }
    ASSERT_FALSE(r.ok()) << c.spec;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << "the error names the file";
  }
}

TEST_F(PersistenceTest, CorruptAndTruncatedFilesAreRefused) {
  auto m = Load("tiny-e");
  const std::string path = SavedFile(*m);
  const std::string good = ReadAll(path);
  ASSERT_GT(good.size(), 3 * 4096u);
  const KvScheme scheme = Scheme("plain");
  auto expect_refused = [&](const std::string& bytes, const char* what, const char* label) {
    const std::string bad = dir_ + "/bad.g4kv";
    WriteAll(bad, bytes);
    auto r = LoadKvFile(bad, m->config(), scheme, Identity(*m));
    ASSERT_FALSE(r.ok()) << label;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << label << ": " << r.status().ToString();
  };
  // A flipped bit in tensor data, in the header, in the preamble.
  std::string b = good;
  b[4096 + 77] ^= 0x10;
  expect_refused(b, "checksum mismatch", "tensor byte");
  b = good;
  b[good.size() - 20] ^= 0x01;
  expect_refused(b, "header checksum", "header byte");
  b = good;
  b[17] ^= 0x01;
  expect_refused(b, "preamble checksum", "preamble byte");
  b = good;
  b[0] = 'X';
  expect_refused(b, "bad magic", "magic");
  // Every flipped byte is caught somewhere (sampled across the file).
  for (size_t at = 0; at < good.size(); at += 997) {
    b = good;
    b[at] ^= 0x40;
    const std::string bad = dir_ + "/flip.g4kv";
    WriteAll(bad, b);
    auto r = LoadKvFile(bad, m->config(), scheme, Identity(*m));
    // Padding bytes are not covered by a checksum; everything else is.
    if (r.ok()) {
      EXPECT_EQ(good[at], 0) << "a flipped non-padding byte at " << at << " was accepted";
    }
  }
  // Truncations.
  for (size_t keep : {good.size() - 1, good.size() / 2, size_t{100}, size_t{10}, size_t{0}})
    expect_refused(good.substr(0, keep), "truncated", "truncated file");
  // An appended byte changes the size the header promises.
  expect_refused(good + "x", "header says", "appended byte");
  // The original file is still good.
  EXPECT_TRUE(LoadKvFile(path, m->config(), scheme, Identity(*m)).ok());
}

TEST_F(PersistenceTest, FailedSaveLeavesNoFileBehind) {
  auto m = Load("tiny-e");
  auto kv = SequenceKv::MakePlain(m->config());
  const auto ids = Ids(12, 3, m->vocab_size());
  Run(*m, *kv, ids, 12);
  EXPECT_FALSE(SaveKvFile(dir_ + "/missing-dir/x.g4kv", *kv, Identity(*m), ids).ok());
  const Status wrong = SaveKvFile(dir_ + "/x.g4kv", *kv, Identity(*m), {1, 2, 3});
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "no file or temporary left";
}

}  // namespace
}  // namespace g4
