// The read policy: how g4 opens every file it reads (configs, tokenizer
// files, safetensors, KV files, prompt files).
//
//  - Regular files only. A directory, named pipe (FIFO), socket or device is
//    refused with a message saying which it is, before anything is read; a
//    FIFO is opened with O_NONBLOCK, so open() never waits for a writer, and a
//    device is never opened at all (stat first, then fstat on the opened
//    descriptor against a swap in between).
//  - Symlinks are followed; a loop is a clean error, never an exception
//    (nothing here uses std::filesystem).
//  - Files read whole are size-capped before reading, and the cap holds even
//    when st_size lies (procfs, a file still growing): at most cap + 1 bytes
//    are ever read.
//
// Messages carry no module tag ("/m/config.json is a directory, not a file");
// callers prefix their own ("[config] ").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/limits.h"
#include "core/status.h"

namespace g4 {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// What a path names, after following symlinks.
enum class PathType { kMissing, kRegular, kDirectory, kOther };

// What a file of st_mode `mode` is, for messages: "a directory", "a named
// pipe (FIFO)", "a symbolic link" (from lstat), ..., "a regular file".
const char* FileKindOf(unsigned mode);

// kMissing for a path that does not exist (or runs through a non-directory);
// an error for a symlink loop, a permission problem or an over-long path.
StatusOr<PathType> StatPath(const std::string& path);

// InvalidArgument unless `path` is a directory: "<path> is a regular file,
// not a directory"; NotFound when missing.
Status RequireDirectory(const std::string& path);

// A regular file opened read-only (O_CLOEXEC) with its size.
struct OpenedFile {
  UniqueFd fd;
  uint64_t size = 0;
};
// Opens `path` under the policy above: NotFound when missing;
// InvalidArgument for a directory, FIFO, socket, device or symlink loop;
// IoError for what the OS refuses (permissions).
StatusOr<OpenedFile> OpenRegularFile(const std::string& path);

// Reads the regular file `path` whole. OutOfRange when it is larger than
// `max_bytes`; the message names `limit_name` (a constant of core/limits.h)
// so users can look the limit up: "<path> is 5368709120 bytes, over the
// 4194304-byte limit (kMaxConfigBytes)".
StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes,
                                       std::string_view limit_name);
// The same with kMaxTextFileBytes: for text a command reads whole.
StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace g4
