// Hostile and careless command lines (issue 11), through the real binary:
// absurd numbers, files that are not files, raw bytes, a symlink loop as the
// model, and a stdout that cannot be written. Each must end in one clean
// line on stderr with the right exit code: 2 for what the user typed, 1 for
// what went wrong at run time; never a signal, a hang or output.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
using testing::StderrOf;
namespace fs = std::filesystem;
using testing::RunG4;


// One "g4 CMD: ..." line on stderr, nothing on stdout, exit `code`, and the
// line contains `want`.
void ExpectCleanError(const std::string& args, int code, const std::string& cmd, const std::string& want) {
  SCOPED_TRACE(args);
  const auto r = RunG4(args + " </dev/null");
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, code) << r.all;
  const std::string err = StderrOf(r);
  EXPECT_EQ(err.rfind("g4 " + cmd + ": ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(want), std::string::npos) << "expected '" << want << "' in: " << err;
  EXPECT_LT(err.size(), 400u) << "a range of 300 digits?\n" << err;
  EXPECT_EQ(r.out, "");
}

TEST(HostileCli, AbsurdNumbersAreUsageErrors) {
  const std::string demo = DemoModelDir();
  struct Case {
    std::string cmd, args, want;
  };
  const std::vector<Case> cases = {
      // Seeds past 64 bits (and past int64) used to saturate silently.
      {"generate", demo + " hi --seed 18446744073709551616", "out of range"},
      {"generate", demo + " hi --seed 9223372036854775808", "out of range"},
      {"generate", demo + " hi --seed 99999999999999999999999999", "out of range"},
      {"generate", demo + " hi --seed 010", "leading zeros"},  // CLI11 reads it as octal 8
      {"generate", demo + " hi --seed 0x10", "not a decimal integer"},
      {"generate", demo + " hi --top-k 99999999999999999999", "out of range"},
      // Non-finite floats: the sampler saw NaN, chat started and failed per message.
      {"generate", demo + " hi --temp nan", "not a finite number"},
      {"generate", demo + " hi --temp inf", "not a finite number"},
      {"generate", demo + " hi --temp 1e999", "not a finite number"},
      {"generate", demo + " hi --top-p nan", "not a finite number"},
      {"chat", demo + " --temp nan", "not a finite number"},
      {"chat", demo + " --presence-penalty -inf", "not a finite number"},
      // Ranges stated in numbers a person can read.
      {"generate", demo + " hi -n -1", "not in range 0 to 2147483647"},
      {"chat", demo + " -n -1", "not in range 0 to 2147483647"},
      {"generate", demo + " hi --chunk 0", "not in range 1 to 1048576"},
      {"bench", demo + " --chunk 0", "not in range 1 to 1048576"},
      // Sizes that allocated until bad_alloc or 8 GB.
      {"logits", demo + " --ids 1 --greedy 2147483647 --out /tmp/never.st", "--greedy"},
      {"bench", demo + " --prompt 2147483647", "--prompt"},
      {"kv-eval", "-m " + demo + " --tokens 2147483647", "--tokens"},
      {"kv-eval", "-m " + demo + " --prompt-len 2147483647", "--prompt-len"},
      {"kv-eval", "--preset tiny --context 1e15", "--ctx-size"},
      {"kv-eval", "--preset tiny --context 1000000000000000", "not in range"},
      // Within the flag's range, past the model's context (32768): refused
      // before the random prompt or the logit rows are built.
      {"kv-eval", "-m " + demo + " --tokens 40000", "exceed the model's context of 32768"},
      {"kv-eval", "-m " + demo + " --prompt-len 40000", "exceed the model's context of 32768"},
      {"bench", demo + " --gpu-memory 12Q", "is not a size"},
      {"generate", demo + " hi --gpu-memory -1G", "is not a size"},
  };
  for (const Case& c : cases) ExpectCleanError(c.cmd + " " + c.args, 2, c.cmd, c.want);
  // A cap the weights already fill: refused at run time, naming the flag.
  ExpectCleanError("generate " + demo + " hi --gpu-memory 1K", 1, "generate", "--gpu-memory");
}

// A prompt longer than max_position_embeddings (32768 for the demo model)
// used to run; now generate, and the scheduler under every command, refuse it.
TEST(HostileCli, PromptsLongerThanTheContextAreRefused) {
  const std::string demo = DemoModelDir();
  const std::string tmp = testing::MakeTempDir();
  {
    std::ofstream f(tmp + "/long.txt");
    for (int i = 0; i < 40000; ++i) f << "word ";
  }
  ExpectCleanError("generate " + demo + " -f " + tmp + "/long.txt -n 2", 1, "generate", "the context holds 32768");
  ExpectCleanError("generate " + demo + " -f " + tmp + "/long.txt -n 2 -c 64", 1, "generate", "the context holds 64");
  ExpectCleanError("logits " + demo + " --ids 1 --greedy 40000 --out " + tmp + "/x.st", 1, "logits",
                   "exceed the model's context of 32768");
  ExpectCleanError("bench " + demo + " --prompt 40000 --gen 1", 1, "bench", "exceed the model's context of 32768");
  EXPECT_FALSE(fs::exists(tmp + "/x.st"));
}

TEST(HostileCli, FilesThatAreNotFilesAreNamed) {
  const std::string demo = DemoModelDir();
  const std::string tmp = testing::MakeTempDir();
  ASSERT_EQ(::mkfifo((tmp + "/fifo").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("loop", (tmp + "/loop").c_str()), 0);
  fs::create_directory(tmp + "/dir");
  struct Case {
    std::string path, want;
  };
  const std::vector<Case> cases = {
      {"/dev/zero", "/dev/zero is a character device, not a file"},  // read until out of memory
      {tmp + "/fifo", "is a named pipe (FIFO), not a file"},         // blocked in open()
      {tmp + "/dir", "is a directory, not a file"},
      {tmp + "/loop", "too many levels of symbolic links"},          // was "File does not exist"
      {tmp + "/missing", "no such file"},
  };
  for (const Case& c : cases) {
    ExpectCleanError("perplexity " + demo + " -f " + c.path + " -c 32", 2, "perplexity", c.want);
    ExpectCleanError("generate " + demo + " -f " + c.path, 2, "generate", c.want);
  }
}

TEST(HostileCli, SymlinkLoopAsModelDirectoryIsNamed) {
  const std::string tmp = testing::MakeTempDir();
  ASSERT_EQ(::symlink("m", (tmp + "/m").c_str()), 0);
  ExpectCleanError("generate " + tmp + "/m hi", 1, "generate", "too many levels of symbolic links");
  ExpectCleanError("chat " + tmp + "/m", 1, "chat", "too many levels of symbolic links");
  ExpectCleanError("bench " + tmp + "/m", 1, "bench", "too many levels of symbolic links");
  // A tokenizer.json that links to itself, in an otherwise good model.
  const std::string m = tmp + "/model";
  fs::create_directory(m);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"})
    fs::create_symlink(fs::absolute(DemoModelDir() + "/" + f), m + "/" + f);
  fs::create_symlink("tokenizer.json", m + "/tokenizer.json");
  ExpectCleanError("generate " + m + " hi", 1, "generate", "too many levels of symbolic links");
  ExpectCleanError("chat " + m, 1, "chat", "too many levels of symbolic links");
}

TEST(HostileCli, RawBytesAreEscapedInErrors) {
  const std::string demo = DemoModelDir();
  struct Case {
    std::string cmd, args, want;
  };
  const std::vector<Case> cases = {
      {"generate", demo + " hi '--a\xff" "b'", "--a\\xFFb"},
      {"generate", demo + " hi --kv 'a\xff" "b' -c 64", "'a\\xFFb'"},
      {"generate", demo + " hi --kv 'a\nb\x1b[31m' -c 64", "'a\\x0Ab\\x1B[31m'"},  // one line, no colour
      {"detokenize", demo + " '1,\xff'", "\\xFF"},
      {"perplexity", demo + " -f '/nonexistent/\xff\xfe'", "\\xFF\\xFE"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const auto r = RunG4(c.cmd + " " + c.args + " </dev/null");
    EXPECT_FALSE(r.signaled);
    EXPECT_NE(r.exit_code, 0);
    const std::string err = StderrOf(r);
    EXPECT_NE(err.find(c.want), std::string::npos) << err;
    EXPECT_EQ(err.find('\xff'), std::string::npos) << "raw 0xFF on stderr";
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << "raw ESC on stderr";
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  // Valid UTF-8 stays readable.
  const auto r = RunG4("generate '/nonexistent/caf\xc3\xa9' hi");
  EXPECT_NE(StderrOf(r).find("caf\xc3\xa9"), std::string::npos) << r.all;
  // The unknown-command line too.
  const auto u = RunG4("'x\xff'");
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_NE(StderrOf(u).find("x\\xFF"), std::string::npos) << u.all;
}

TEST(HostileCli, StdoutWriteErrorsAreReported) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  const std::string demo = DemoModelDir();
  for (const std::string& args :
       {"tokenize " + demo + " hello", "detokenize " + demo + " 5,6", "generate " + demo + " hi -n 4 -c 64 -q",
        "generate " + demo + " hi -n 4 -c 64 --json", "bench " + demo + " --prompt 4 --gen 2 --memcpy-mib 0",
        std::string("kv-eval --preset tiny"), "models " + demo, "perplexity " + demo + " -f " + demo + "/README.md -c 32 --chunks 1 -q",
        std::string("generate --help"), std::string("--help")}) {
    SCOPED_TRACE(args);
    const auto r = RunG4(args + " >/dev/full </dev/null");
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.exit_code, 1) << r.all;
    EXPECT_NE(r.all.find("stdout"), std::string::npos) << r.all;
  }
  // The same commands succeed when stdout can be written.
  const auto ok = RunG4("kv-eval --preset tiny >/dev/null");
  EXPECT_EQ(ok.exit_code, 0) << ok.all;
}

}  // namespace
}  // namespace g4
