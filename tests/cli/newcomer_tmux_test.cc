// A newcomer's path, end to end, in a real terminal (tmux): make a model
// with g4 synth (a progress bar), put it in a Hugging Face cache the way
// `hf download` does, find it with g4 models, chat with it by repo id (a
// cold load shows progress), and make a 4-bit copy with g4 quantize (a
// progress bar; a non-empty output folder is refused without --force). Also:
// the long-prefill and perplexity bars, and no bar at all without a terminal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fake_hf_cache.h"
#include "test_util.h"
#include "tmux_session.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
using testing::G4Binary;
namespace fs = std::filesystem;
using testing::TmuxSession;

// Drops a file's pages from the page cache, as after a reboot.
void Evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << path;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

TEST(Newcomer, SynthCacheModelsChatQuantize) {
  if (!testing::HaveTmux()) GTEST_SKIP() << "tmux not installed";
  const fs::path tmp = testing::MakeTempDir();
  const std::string hub = (tmp / "hub").string(), src = (tmp / "made").string(), out = (tmp / "gemma-4-tiny-4bit").string();
  const std::string env = "env HF_HUB_CACHE=" + hub + " ";
  {
    TmuxSession t("g4synth", G4Binary() + " synth --preset tiny --quant bf16 --tokenizer " +
                                 testing::TestDataPath("tokenizer/tokenizer.json") + " -o " + src);
    ASSERT_TRUE(t.WaitForText("EXITED:0", 120)) << t.Screen();
    EXPECT_TRUE(t.WaitForText("synth [============================] 100%", 1)) << t.Screen();
  }
  const std::string snapshot = testing::AddToFakeCache(hub, "testorg", "gemma-4-tiny", "5eed0001", src, /*move=*/true);

  // g4 models finds it.
  setenv("HF_HUB_CACHE", hub.c_str(), 1);
  const auto models = testing::RunG4("models --json");
  unsetenv("HF_HUB_CACHE");
  ASSERT_EQ(models.exit_code, 0) << models.all;
  const auto listing = nlohmann::json::parse(models.out);
  ASSERT_EQ(listing["models"].size(), 1u) << listing.dump(1);
  const auto& m = listing["models"][0];
  EXPECT_EQ(m["name"], "testorg/gemma-4-tiny");
  EXPECT_EQ(m["status"], "ok");
  EXPECT_EQ(m["format"], "hf");
  EXPECT_EQ(m["bytes"].get<uint64_t>(), fs::file_size(fs::path(snapshot) / "model.safetensors"));

  // g4 chat -m ORG/NAME chats; from a cold page cache the load shows progress.
  Evict((fs::path(snapshot) / "model.safetensors").string());
  {
    TmuxSession t("g4newchat", env + G4Binary() + " chat -m testorg/gemma-4-tiny --no-history -n 8");
    ASSERT_TRUE(t.WaitForText("/help for commands", 120)) << t.Screen();
    EXPECT_TRUE(t.WaitForText("loading [============================] 100%", 1)) << t.Screen();
    t.Keys("'Hello' Enter");
    ASSERT_TRUE(t.WaitForText(" cached, ", 60)) << t.Screen();  // the answer's footer
    t.Keys("'/exit' Enter");
    ASSERT_TRUE(t.WaitForText("EXITED:0", 20)) << t.Screen();
  }

  // g4 quantize makes a 4-bit copy, with a progress bar.
  {
    TmuxSession t("g4quant", env + G4Binary() + " quantize -m testorg/gemma-4-tiny " + out + " --bits 4");
    ASSERT_TRUE(t.WaitForText("EXITED:0", 120)) << t.Screen();
    EXPECT_TRUE(t.WaitForText("quantize [============================] 100%", 1)) << t.Screen();
    EXPECT_TRUE(t.WaitForText("4-bit, group 64", 1)) << t.Screen();
  }
  const auto q = testing::RunG4("models " + out + " --json");
  ASSERT_EQ(q.exit_code, 0) << q.all;
  const auto qm = nlohmann::json::parse(q.out)["models"][0];
  EXPECT_EQ(qm["format"], "mlx");
  EXPECT_EQ(qm["quantization"].get<std::string>().rfind("4-bit g64", 0), 0u) << qm.dump();
  EXPECT_LT(qm["bytes"].get<uint64_t>(), m["bytes"].get<uint64_t>() / 3);
  const auto gen = testing::RunG4("generate -m " + out + " hello -n 4");
  EXPECT_EQ(gen.exit_code, 0) << gen.all;
  // Again into the same folder: refused, unless --force. No bar without a terminal.
  const auto again = testing::RunG4("quantize " + snapshot + " " + out);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.all.find("not empty"), std::string::npos) << again.all;
  EXPECT_NE(again.all.find("--force"), std::string::npos) << again.all;
  const auto forced = testing::RunG4("quantize " + snapshot + " " + out + " --force --bits 8");
  ASSERT_EQ(forced.exit_code, 0) << forced.all;
  EXPECT_EQ(forced.all.find("quantize ["), std::string::npos) << forced.all;
  fs::remove_all(tmp);
}

TEST(Progress, LongPrefillAndPerplexityShowBarsOnATerminal) {
  if (!testing::HaveTmux()) GTEST_SKIP() << "tmux not installed";
  const std::string file = testing::MakeTempDir() + "/long.txt";
  {
    std::ofstream f(file);
    for (int i = 0; i < 60; ++i) f << "The package manager downloads the files, checks their signatures and installs them. ";
  }
  // --chunk 16: pieces of 64 tokens, so a prompt of a few hundred shows the bar.
  TmuxSession t("g4prefill", G4Binary() + " generate " + DemoModelDir() + " -f " + file + " --raw --chunk 16 -n 4 --temp 0 > " +
                                 file + ".out && " + G4Binary() + " perplexity " + DemoModelDir() + " -f " + file +
                                 " -c 64 --chunks 4");
  ASSERT_TRUE(t.WaitForText("EXITED:0", 120)) << t.Screen();
  EXPECT_TRUE(t.WaitForText("prefill [============================] 100%", 1)) << t.Screen();
  EXPECT_TRUE(t.WaitForText("perplexity [============================] 100%  window 4/4, ppl", 1)) << t.Screen();
  // The text is what a run without pieces (no terminal, so no bar) gives.
  const auto plain = testing::RunG4("generate " + DemoModelDir() + " -f " + file + " --raw --chunk 16 -n 4 --temp 0");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.all.find("prefill ["), std::string::npos);
  std::ifstream in(file + ".out");
  const std::string tty_text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(tty_text, plain.out);
}

}  // namespace
}  // namespace g4
