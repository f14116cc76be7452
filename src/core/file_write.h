// The write policy: how g4 writes every file it produces (safetensors,
// configs, KV files, logits --out).
//
//  - The target must be a new path or an existing regular file. An existing
//    symlink (even to a regular file), directory, FIFO, socket or device is
//    refused: renaming over it would replace the link or the device node
//    itself (as root, `--out /dev/full` once turned the device into a file).
//  - Data goes to a temporary file in the target's directory (created with
//    O_EXCL | O_NOFOLLOW, so a planted file or link at that name is never
//    written through), is fsynced, then renamed over the target; the
//    directory is fsynced after the rename. Readers see the old file or the
//    new one, never a torn one.
//  - A target that did not exist is created with RENAME_NOREPLACE, so
//    something created there meanwhile is not silently replaced.
//  - A writer that is never committed removes its temporary file.
//
// Messages carry no module tag; callers prefix their own ("[safetensors] ").
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/file_read.h"
#include "core/status.h"

namespace g4 {

// OK when `path` may be written under the policy: it does not exist (its
// directory must), or it is a regular file and not a symlink. Otherwise
// InvalidArgument naming what is there: "out.st is a symbolic link; g4
// replaces only regular files".
Status CheckWriteTarget(const std::string& path);

// Writes one file atomically under the policy. Usage:
//   G4_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
//   G4_RETURN_IF_ERROR(w.Write(data, n));  // any number of times
//   G4_RETURN_IF_ERROR(w.Commit());
class AtomicFileWriter {
 public:
  // Checks the target and creates the temporary file.
  static StatusOr<AtomicFileWriter> Create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();  // removes the temporary file unless committed

  // Appends `size` bytes (retrying short writes and EINTR).
  Status Write(const void* data, size_t size);
  // Appends zeros up to the next multiple of `align` bytes.
  Status PadTo(uint64_t align);
  // Overwrites bytes already written (e.g. a header patched at the end);
  // does not move the append position.
  Status WriteAt(uint64_t offset, const void* data, size_t size);
  // Bytes appended so far.
  uint64_t size() const { return size_; }
  // fsync, close, re-check the target, rename over it, fsync the directory.
  // The writer is finished afterwards whatever the outcome.
  Status Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  AtomicFileWriter() = default;
  void Abandon();

  std::string path_;
  std::string temp_path_;
  UniqueFd fd_;
  uint64_t size_ = 0;
  bool target_existed_ = false;
};

// The whole file in one call: Create, Write, Commit.
Status WriteFileAtomic(const std::string& path, const void* data, size_t size);

// Writes all of `data` to `fd`, retrying short writes and EINTR; `what`
// names the destination in errors ("stdout: write: No space left on device").
Status WriteAllToFd(int fd, const void* data, size_t size, std::string_view what);

// Flushes `f` and reports any write error it has seen (a full disk, a closed
// pipe, `> /dev/full`): stdio buffers writes and only remembers the failure
// in the stream's error flag, which nothing checks by default.
Status FlushAndCheck(std::FILE* f, std::string_view what);

}  // namespace g4
