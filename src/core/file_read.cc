#include "core/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace g4 {
namespace {

Status NotAFile(const std::string& path, mode_t mode) {
  return InvalidArgument(path + " is " + FileKindOf(mode) + ", not a file");
}

// The error for a failed stat() or open() of `path`.
Status PathError(const std::string& path, int err) {
  switch (err) {
    case ENOENT: return NotFound(path + ": no such file");
    case ENOTDIR: return NotFound(path + ": no such file (a parent is not a directory)");
    case ELOOP: return InvalidArgument(path + ": too many levels of symbolic links (a symlink loop?)");
    case ENAMETOOLONG: return InvalidArgument(path + ": path too long");
    case EACCES:
    case EPERM: return IoError(path + ": permission denied");
    default: return IoError(path + ": " + std::strerror(err));
  }
}

}  // namespace

const char* FileKindOf(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<PathType> StatPath(const std::string& path) {
  if (path.empty()) return InvalidArgument("empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return PathType::kMissing;
    return PathError(path, errno);
  }
  if (S_ISREG(st.st_mode)) return PathType::kRegular;
  if (S_ISDIR(st.st_mode)) return PathType::kDirectory;
  return PathType::kOther;
}

Status RequireDirectory(const std::string& path) {
  if (path.empty()) return InvalidArgument("empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFound(path + ": no such directory");
    return PathError(path, errno);
  }
  if (S_ISDIR(st.st_mode)) return Status::Ok();
  return InvalidArgument(path + " is " + FileKindOf(st.st_mode) + ", not a directory");
}

StatusOr<OpenedFile> OpenRegularFile(const std::string& path) {
  if (path.empty()) return InvalidArgument("empty path");
  // stat first: opening some devices has side effects (a tape rewinds, a
  // terminal becomes ours), so anything but a regular file is refused unopened.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PathError(path, errno);
  if (!S_ISREG(st.st_mode)) return NotAFile(path, st.st_mode);
  // O_NONBLOCK: should the path be swapped for a FIFO after the stat, open()
  // still returns at once and the fstat below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return PathError(path, errno);
  OpenedFile f{UniqueFd(fd), 0};
  if (::fstat(fd, &st) != 0) return IoError(path + ": fstat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return NotAFile(path, st.st_mode);
  // Back to blocking reads (no effect on regular files, but explicit).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes, std::string_view limit_name) {
  G4_ASSIGN_OR_RETURN(OpenedFile f, OpenRegularFile(path));
  auto too_big = [&](const std::string& size) {
    return OutOfRange(path + " is " + size + " bytes, over the " + std::to_string(max_bytes) + "-byte limit (" +
                      std::string(limit_name) + ")");
  };
  if (f.size > max_bytes) return too_big(std::to_string(f.size));
  auto read_some = [&](char* dst, size_t n) -> StatusOr<size_t> {
    for (;;) {
      const ssize_t got = ::read(f.fd.get(), dst, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return IoError(path + ": read: " + std::strerror(errno));
    }
  };
  std::string out(static_cast<size_t>(f.size), '\0');
  size_t have = 0;
  while (have < out.size()) {
    G4_ASSIGN_OR_RETURN(size_t n, read_some(out.data() + have, out.size() - have));
    if (n == 0) break;  // the file shrank
    have += n;
  }
  out.resize(have);
  // st_size is only a hint (procfs says 0, a file may grow): read on to EOF
  // through a small buffer, stopping one chunk past the cap at most.
  char buf[1 << 16];
  for (;;) {
    G4_ASSIGN_OR_RETURN(size_t n, read_some(buf, sizeof(buf)));
    if (n == 0) break;
    if (out.size() + n > max_bytes) return too_big("more than " + std::to_string(max_bytes));
    out.append(buf, n);
  }
  return out;
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  return ReadFileToString(path, kMaxTextFileBytes, "kMaxTextFileBytes");
}

}  // namespace g4
