// The read policy (core/file_read.h): every hostile path ends in a clean
// Status, and nothing blocks. Each test that could hang if the policy broke
// arms an alarm, so a regression kills the test instead of stalling CI.
#include "core/file_read.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <string>

#include "core/mapped_file.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::ExpectError;

// Fails the test by SIGALRM if the body blocks for more than 10 s.
class NoHang {
 public:
  NoHang() { ::alarm(10); }
  ~NoHang() { ::alarm(0); }
};

TEST(ReadPolicy, ReadsARegularFile) {
  const std::string path = testing::MakeTempDir() + "/a.json";
  testing::WriteFileBytes(path, "{\"a\": 1}");
  auto text = ReadFileToString(path, 100, "kTestLimit");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "{\"a\": 1}");
}

TEST(ReadPolicy, MissingFileIsNotFound) {
  ExpectError(ReadFileToString("/nonexistent/g4/config.json", 100, "kTestLimit").status(), StatusCode::kNotFound,
              {"/nonexistent/g4/config.json", "no such file"});
}

TEST(ReadPolicy, DirectoryIsNamed) {
  const std::string dir = testing::MakeTempDir() + "/config.json";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ExpectError(ReadFileToString(dir, 100, "kTestLimit").status(), StatusCode::kInvalidArgument,
              {dir + " is a directory, not a file"});
  ExpectError(MappedFile::Open(dir).status(), StatusCode::kInvalidArgument, {"is a directory, not a file"});
}

TEST(ReadPolicy, FifoIsRefusedWithoutBlocking) {
  NoHang guard;
  const std::string fifo = testing::MakeTempDir() + "/tokenizer.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // No writer ever opens the FIFO: a plain open() for reading would wait forever.
  ExpectError(ReadFileToString(fifo, 100, "kTestLimit").status(), StatusCode::kInvalidArgument,
              {"named pipe (FIFO)", "not a file"});
  ExpectError(MappedFile::Open(fifo).status(), StatusCode::kInvalidArgument, {"named pipe (FIFO)"});
  ExpectError(OpenRegularFile(fifo).status(), StatusCode::kInvalidArgument, {"named pipe (FIFO)"});
}

TEST(ReadPolicy, DevicesAreRefusedBeforeReading) {
  NoHang guard;
  // /dev/zero never ends: reading it whole would exhaust memory.
  ExpectError(ReadFileToString("/dev/zero", kMaxConfigBytes, "kMaxConfigBytes").status(),
              StatusCode::kInvalidArgument, {"/dev/zero is a character device, not a file"});
  ExpectError(MappedFile::Open("/dev/zero").status(), StatusCode::kInvalidArgument, {"character device"});
  ExpectError(ReadFileToString("/dev/null").status(), StatusCode::kInvalidArgument, {"character device"});
}

TEST(ReadPolicy, SymlinkLoopsAreCleanErrors) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(::symlink((dir + "/self.json").c_str(), (dir + "/self.json").c_str()), 0);
  ExpectError(ReadFileToString(dir + "/self.json", 100, "kTestLimit").status(), StatusCode::kInvalidArgument,
              {"self.json", "symbolic links"});
  ASSERT_EQ(::symlink((dir + "/b").c_str(), (dir + "/a").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/a").c_str(), (dir + "/b").c_str()), 0);
  ExpectError(MappedFile::Open(dir + "/a").status(), StatusCode::kInvalidArgument, {"symbolic links"});
  ExpectError(StatPath(dir + "/a").status(), StatusCode::kInvalidArgument, {"symbolic links"});
  ExpectError(RequireDirectory(dir + "/a"), StatusCode::kInvalidArgument, {"symbolic links"});
  // A loop in the middle of a path, as a model directory.
  ExpectError(ReadFileToString(dir + "/a/config.json", 100, "kTestLimit").status(), StatusCode::kInvalidArgument,
              {"symbolic links"});
}

TEST(ReadPolicy, SizeCapIsCheckedBeforeReading) {
  const std::string path = testing::MakeTempDir() + "/big.json";
  testing::WriteFileBytes(path, std::string(101, ' '));
  ExpectError(ReadFileToString(path, 100, "kTestLimit").status(), StatusCode::kOutOfRange,
              {path, "101 bytes", "100-byte limit", "kTestLimit"});
  auto exact = ReadFileToString(path, 101, "kTestLimit");
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), 101u);
}

TEST(ReadPolicy, SizeCapHoldsWhenStSizeLies) {
  // procfs files report st_size 0 but have content: the cap must still hold.
  auto small = ReadFileToString("/proc/self/status", 16, "kTestLimit");
  ExpectError(small.status(), StatusCode::kOutOfRange, {"more than 16", "kTestLimit"});
  auto whole = ReadFileToString("/proc/self/status", 1 << 20, "kTestLimit");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_NE(whole->find("Name:"), std::string::npos);
}

TEST(ReadPolicy, StatPathAndRequireDirectory) {
  const std::string dir = testing::MakeTempDir();
  testing::WriteFileBytes(dir + "/f", "x");
  ASSERT_TRUE(StatPath(dir).ok());
  EXPECT_EQ(*StatPath(dir), PathType::kDirectory);
  EXPECT_EQ(*StatPath(dir + "/f"), PathType::kRegular);
  EXPECT_EQ(*StatPath(dir + "/missing"), PathType::kMissing);
  EXPECT_EQ(*StatPath(dir + "/f/below"), PathType::kMissing);
  EXPECT_EQ(*StatPath("/dev/null"), PathType::kOther);
  EXPECT_TRUE(RequireDirectory(dir).ok());
  ExpectError(RequireDirectory(dir + "/f"), StatusCode::kInvalidArgument, {"is a regular file, not a directory"});
  ExpectError(RequireDirectory(dir + "/missing"), StatusCode::kNotFound, {"no such directory"});
  ExpectError(RequireDirectory(""), StatusCode::kInvalidArgument, {"empty path"});
}

}  // namespace
}  // namespace g4
