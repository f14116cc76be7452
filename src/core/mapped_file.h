// A read-only memory mapping of a whole file. Checkpoint weights stay here:
// the loader hands out views into the mapping, never copies. Files are opened
// under the read policy of core/file_read.h (regular files only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/file_read.h"   // ReadFileToString, for existing includers
#include "core/file_write.h"  // WriteFileAtomic, for existing includers
#include "core/status.h"

namespace g4 {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to size 0 with data() == nullptr.
  // Errors as OpenRegularFile (a FIFO or device is refused, never opened).
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace g4
