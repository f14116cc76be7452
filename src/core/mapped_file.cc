#include "core/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <cstdint>

namespace g4 {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  G4_ASSIGN_OR_RETURN(OpenedFile f, OpenRegularFile(path));
  if (f.size > SIZE_MAX) return ResourceExhausted(path + ": too large to map");
  const size_t size = static_cast<size_t>(f.size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd.get(), 0);
    if (p == MAP_FAILED) return IoError(path + ": mmap: " + std::strerror(errno));
    data = static_cast<const uint8_t*>(p);
  }
  // The mapping keeps the file alive; the descriptor closes here.
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace g4
