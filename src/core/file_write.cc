#include "core/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace g4 {
namespace {

// The directory holding `path`, for creating the temp file next to it and
// fsyncing after the rename.
std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Whether the target exists (as a regular file); errors for anything else.
StatusOr<bool> InspectTarget(const std::string& path) {
  if (path.empty()) return InvalidArgument("empty output path");
  if (path.back() == '/') return InvalidArgument(path + " names a directory, not a file");
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      G4_RETURN_IF_ERROR(RequireDirectory(DirOf(path)).WithContext("cannot write " + path));
      return false;
    }
    if (errno == ENOTDIR) return NotFound("cannot write " + path + ": a parent is not a directory");
    if (errno == ELOOP) return InvalidArgument("cannot write " + path + ": too many levels of symbolic links");
    return IoError("cannot write " + path + ": " + std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return true;
  return InvalidArgument(path + " is " + FileKindOf(st.st_mode) +
                         "; g4 replaces only regular files (remove it or choose another path)");
}

std::atomic<unsigned> temp_counter{0};

}  // namespace

Status CheckWriteTarget(const std::string& path) { return InspectTarget(path).status(); }

StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  G4_ASSIGN_OR_RETURN(bool existed, InspectTarget(path));
  AtomicFileWriter w;
  w.path_ = path;
  w.target_existed_ = existed;
  // A few attempts in case a stale temp file of a dead process with our pid
  // is in the way (O_EXCL refuses it rather than writing through it).
  for (int attempt = 0; attempt < 8; ++attempt) {
    w.temp_path_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(temp_counter++);
    const int fd = ::open(w.temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      w.fd_ = UniqueFd(fd);
      return w;
    }
    if (errno != EEXIST) return IoError("cannot create " + w.temp_path_ + ": " + std::strerror(errno));
  }
  return IoError("cannot create a temporary file next to " + path);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)),
      temp_path_(std::move(o.temp_path_)),
      fd_(std::move(o.fd_)),
      size_(o.size_),
      target_existed_(o.target_existed_) {
  o.temp_path_.clear();
}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& o) noexcept {
  if (this != &o) {
    Abandon();
    path_ = std::move(o.path_);
    temp_path_ = std::move(o.temp_path_);
    fd_ = std::move(o.fd_);
    size_ = o.size_;
    target_existed_ = o.target_existed_;
    o.temp_path_.clear();
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  fd_ = UniqueFd();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

Status AtomicFileWriter::Write(const void* data, size_t size) {
  G4_RETURN_IF_ERROR(WriteAt(size_, data, size));
  size_ += size;
  return Status::Ok();
}

Status AtomicFileWriter::PadTo(uint64_t align) {
  if (align == 0) return Status::Ok();
  static const char kZeros[4096] = {};
  uint64_t pad = (align - size_ % align) % align;
  while (pad > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof(kZeros)));
    G4_RETURN_IF_ERROR(Write(kZeros, n));
    pad -= n;
  }
  return Status::Ok();
}

Status AtomicFileWriter::WriteAt(uint64_t offset, const void* data, size_t size) {
  if (!fd_.valid()) return Internal(path_ + ": write after commit");
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_.get(), p, size, static_cast<off_t>(offset));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      Status s = IoError(temp_path_ + ": write: " + (n < 0 ? std::strerror(errno) : "no progress"));
      Abandon();
      return s;
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (!fd_.valid()) return Internal(path_ + ": commit without an open file");
  if (::fsync(fd_.get()) != 0) {
    Status s = IoError(temp_path_ + ": fsync: " + std::strerror(errno));
    Abandon();
    return s;
  }
  const int fd = fd_.release();
  if (::close(fd) != 0) {
    Status s = IoError(temp_path_ + ": close: " + std::strerror(errno));
    Abandon();
    return s;
  }
  // The target may have changed while we wrote; check again right before.
  StatusOr<bool> existed = InspectTarget(path_);
  if (!existed.ok()) {
    Abandon();
    return existed.status();
  }
  int rc;
  if (!*existed) {
    rc = ::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
    // Some filesystems lack RENAME_NOREPLACE; the check above must do there.
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) rc = ::rename(temp_path_.c_str(), path_.c_str());
  } else {
    rc = ::rename(temp_path_.c_str(), path_.c_str());
  }
  if (rc != 0) {
    Status s = errno == EEXIST ? InvalidArgument(path_ + " appeared while g4 was writing it; not replaced")
                               : IoError(path_ + ": rename: " + std::strerror(errno));
    Abandon();
    return s;
  }
  temp_path_.clear();
  // Make the rename itself durable.
  const int dir = ::open(DirOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const void* data, size_t size) {
  G4_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  G4_RETURN_IF_ERROR(w.Write(data, size));
  return w.Commit();
}

Status WriteAllToFd(int fd, const void* data, size_t size, std::string_view what) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(std::string(what) + ": write: " + std::strerror(errno));
    }
    if (n == 0) return IoError(std::string(what) + ": write made no progress");
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FlushAndCheck(std::FILE* f, std::string_view what) {
  errno = 0;
  const bool flush_failed = std::fflush(f) != 0;
  const int err = errno;
  if (flush_failed || std::ferror(f)) {
    return IoError(std::string(what) + ": write failed" + (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  }
  return Status::Ok();
}

}  // namespace g4
