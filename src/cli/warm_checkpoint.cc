#include "cli/warm_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/progress.h"
#include "core/mapped_file.h"

namespace g4::cli {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMinColdBytes = uint64_t{16} << 20;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::vector<std::string> WeightFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path d(dir);
  if (fs::exists(d / "model.safetensors.index.json", ec)) {
    auto text = ReadFileToString((d / "model.safetensors.index.json").string());
    const auto j = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    std::set<std::string> shards;
    if (j.is_object() && j.contains("weight_map") && j["weight_map"].is_object())
      for (const auto& [name, file] : j["weight_map"].items())
        if (file.is_string()) shards.insert(file.get<std::string>());
    for (const std::string& s : shards) files.push_back((d / s).string());
    return files;
  }
  if (fs::exists(d / "model.safetensors", ec)) return {(d / "model.safetensors").string()};
  for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".safetensors") files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Residency MeasureResidency(const std::vector<std::string>& files) {
  Residency r;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const std::string& f : files) {
    Fd fd{::open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    struct stat st {};
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) continue;
    const size_t size = static_cast<size_t>(st.st_size);
    r.bytes += size;
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.fd, 0);
    if (map == MAP_FAILED) continue;
    std::vector<unsigned char> vec((size + page - 1) / page);
    if (::mincore(map, size, vec.data()) == 0) {
      uint64_t pages = 0;
      for (unsigned char v : vec) pages += v & 1;
      r.resident += std::min<uint64_t>(size, pages * static_cast<uint64_t>(page));
    }
    ::munmap(map, size);
  }
  return r;
}

uint64_t WarmCheckpoint(const std::string& dir, bool show) {
  if (!show || !StderrIsTerminal()) return 0;
  const std::vector<std::string> files = WeightFiles(dir);
  const Residency r = MeasureResidency(files);
  const uint64_t cold = r.bytes - r.resident;
  if (cold < kMinColdBytes || cold * 4 < r.bytes) return 0;
  Progress bar("loading", r.bytes, Progress::Unit::kBytes, true);
  constexpr size_t kBuf = size_t{8} << 20;
  std::unique_ptr<char[]> buf(new char[kBuf]);
  uint64_t done = 0;
  for (const std::string& f : files) {
    Fd fd{::open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    struct stat st {};
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;  // never a FIFO or device
    ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    while (true) {
      const ssize_t n = ::read(fd.fd, buf.get(), kBuf);
      if (n <= 0) break;
      done += static_cast<uint64_t>(n);
      bar.Update(done);
    }
  }
  bar.Finish();
  return done;
}

}  // namespace g4::cli
