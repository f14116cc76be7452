// The write policy (core/file_write.h): atomic replacement of regular files
// and new paths only; anything else that already exists is left untouched.
#include "core/file_write.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

using testing::ExpectError;

// Only the named entries remain in `dir` (no temporary files left behind).
void ExpectOnlyEntries(const std::string& dir, std::set<std::string> names) {
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) found.insert(e.path().filename().string());
  EXPECT_EQ(found, names);
}

TEST(WritePolicy, CreatesANewFile) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/out.bin", "hello", 5).ok());
  EXPECT_EQ(ReadAll(dir + "/out.bin"), "hello");
  ExpectOnlyEntries(dir, {"out.bin"});
}

TEST(WritePolicy, ReplacesARegularFile) {
  const std::string dir = testing::MakeTempDir();
  testing::WriteFileBytes(dir + "/out.bin", "old contents");
  ASSERT_TRUE(WriteFileAtomic(dir + "/out.bin", "new", 3).ok());
  EXPECT_EQ(ReadAll(dir + "/out.bin"), "new");
  ExpectOnlyEntries(dir, {"out.bin"});
}

TEST(WritePolicy, RefusesASymlinkAndLeavesItsTargetAlone) {
  const std::string dir = testing::MakeTempDir();
  testing::WriteFileBytes(dir + "/precious", "keep me");
  ASSERT_EQ(::symlink((dir + "/precious").c_str(), (dir + "/out.bin").c_str()), 0);
  ExpectError(WriteFileAtomic(dir + "/out.bin", "x", 1), StatusCode::kInvalidArgument,
              {dir + "/out.bin is a symbolic link", "only regular files"});
  EXPECT_TRUE(fs::is_symlink(dir + "/out.bin"));
  EXPECT_EQ(ReadAll(dir + "/precious"), "keep me");
  ExpectOnlyEntries(dir, {"out.bin", "precious"});
  // A dangling link is refused too: renaming would replace the link itself.
  ASSERT_EQ(::symlink((dir + "/nowhere").c_str(), (dir + "/dangling").c_str()), 0);
  ExpectError(WriteFileAtomic(dir + "/dangling", "x", 1), StatusCode::kInvalidArgument, {"symbolic link"});
}

TEST(WritePolicy, RefusesDirectoriesFifosAndSockets) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  ExpectError(WriteFileAtomic(dir + "/sub", "x", 1), StatusCode::kInvalidArgument, {"is a directory"});
  ExpectError(WriteFileAtomic(dir + "/sub/", "x", 1), StatusCode::kInvalidArgument, {"names a directory"});

  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  ExpectError(WriteFileAtomic(dir + "/fifo", "x", 1), StatusCode::kInvalidArgument, {"named pipe (FIFO)"});
  struct stat st;
  ASSERT_EQ(::lstat((dir + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));  // still a FIFO, not replaced by a file

  const std::string sock_path = dir + "/sock";
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ExpectError(WriteFileAtomic(sock_path, "x", 1), StatusCode::kInvalidArgument, {"a socket"});
  ::close(sock);
  ExpectOnlyEntries(dir, {"sub", "fifo", "sock"});
}

TEST(WritePolicy, DevicesAreRefusedByCheckWriteTarget) {
  // Only checked, never written: as root a rename would replace the node.
  ExpectError(CheckWriteTarget("/dev/full"), StatusCode::kInvalidArgument, {"/dev/full is a character device"});
  ExpectError(CheckWriteTarget("/dev/null"), StatusCode::kInvalidArgument, {"character device"});
}

TEST(WritePolicy, MissingDirectoryIsNotFound) {
  const std::string dir = testing::MakeTempDir();
  ExpectError(WriteFileAtomic(dir + "/no/such/out.bin", "x", 1), StatusCode::kNotFound,
              {dir + "/no/such", "no such directory"});
}

TEST(WritePolicy, StreamingWriterCommitsOrCleansUp) {
  const std::string dir = testing::MakeTempDir();
  {
    auto w = AtomicFileWriter::Create(dir + "/a.bin");
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->Write("ab", 2).ok());
    ASSERT_TRUE(w->Write("cd", 2).ok());
    ASSERT_TRUE(w->PadTo(8).ok());
    EXPECT_EQ(w->size(), 8u);
    ASSERT_TRUE(w->WriteAt(1, "X", 1).ok());  // patch in place, append position kept
    ASSERT_TRUE(w->Write("e", 1).ok());
    EXPECT_FALSE(fs::exists(dir + "/a.bin"));  // nothing visible before Commit
    ASSERT_TRUE(w->Commit().ok());
    EXPECT_FALSE(w->Write("e", 1).ok());
  }
  EXPECT_EQ(ReadAll(dir + "/a.bin"), std::string("aXcd\0\0\0\0e", 9));
  {
    auto w = AtomicFileWriter::Create(dir + "/b.bin");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write("x", 1).ok());
    EXPECT_TRUE(fs::exists(w->temp_path()));
  }  // abandoned: the temporary file goes away
  ExpectOnlyEntries(dir, {"a.bin"});
}

TEST(WritePolicy, TargetTurnedIntoSymlinkBeforeCommitIsRefused) {
  const std::string dir = testing::MakeTempDir();
  testing::WriteFileBytes(dir + "/precious", "keep me");
  auto w = AtomicFileWriter::Create(dir + "/out.bin");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write("x", 1).ok());
  ASSERT_EQ(::symlink((dir + "/precious").c_str(), (dir + "/out.bin").c_str()), 0);
  ExpectError(w->Commit(), StatusCode::kInvalidArgument, {"symbolic link"});
  EXPECT_TRUE(fs::is_symlink(dir + "/out.bin"));
  EXPECT_EQ(ReadAll(dir + "/precious"), "keep me");
  ExpectOnlyEntries(dir, {"out.bin", "precious"});
}

TEST(WritePolicy, WriteErrorsAreReported) {
  std::FILE* full = std::fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  std::fputs("some output", full);  // buffered: stdio does not fail yet
  ExpectError(FlushAndCheck(full, "stdout"), StatusCode::kIoError, {"stdout", "write failed"});
  ExpectError(WriteAllToFd(::fileno(full), "x", 1, "stdout"), StatusCode::kIoError, {"stdout: write"});
  std::fclose(full);
}

}  // namespace
}  // namespace g4
