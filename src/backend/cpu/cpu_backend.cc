// CpuBackend: memory, copies and placement for the host.
//
// Allocation: small buffers come from aligned_alloc; large ones from an
// anonymous private mapping, whose pages the kernel commits on first touch,
// so a KV pool or activation arena sized for the worst case costs only what
// is written (Backend::Allocate's contract). Both are aligned to kAlignment.
#include "backend/cpu/cpu_backend.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_ops.h"
#include "core/check.h"

namespace g4 {
namespace {

constexpr size_t kAlignment = 256;
// From this size on, buffers are mappings (page granular, lazily committed).
constexpr size_t kMapMinBytes = size_t{1} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Requests above this are refused at once: no machine has 2^52 bytes, and
// sizes near SIZE_MAX would overflow the rounding below.
constexpr size_t kMaxAllocation = size_t{1} << 52;

// Bytes actually reserved for a request of `bytes` (Free recomputes it).
size_t ReservedBytes(size_t bytes) {
  const size_t n = RoundUp(bytes == 0 ? 1 : bytes, kAlignment);
  return n >= kMapMinBytes ? RoundUp(n, PageSize()) : n;
}

// MemAvailable from /proc/meminfo (kB), else the free physical pages.
size_t SystemAvailableMemory() {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (std::fgets(line, sizeof(line), f)) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    if (found) return static_cast<size_t>(kb) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  return pages > 0 ? static_cast<size_t>(pages) * PageSize() : 0;
}

// A cgroup v2 memory file holding one number (false for "max" or absent).
bool ReadCgroupValue(const char* path, unsigned long long* value) {
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  const bool ok = std::fscanf(f, "%llu", value) == 1;
  std::fclose(f);
  return ok;
}

// The system's available memory, but no more than the container's cgroup
// still allows.
size_t AvailableMemory() {
  size_t available = SystemAvailableMemory();
  unsigned long long limit = 0, used = 0;
  if (ReadCgroupValue("/sys/fs/cgroup/memory.max", &limit) &&
      ReadCgroupValue("/sys/fs/cgroup/memory.current", &used)) {
    available = std::min<size_t>(available, limit > used ? static_cast<size_t>(limit - used) : 0);
  }
  return available;
}

const char* VectorIsa() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(__AVX2__)
  return "AVX2";
#else
  return "scalar";
#endif
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() : ops_(cpu::MakeCpuOps()) {}

  std::string name() const override { return "cpu"; }
  std::string Describe() const override {
    return std::string("cpu: ") + VectorIsa() + ", " + std::to_string(omp_get_max_threads()) + " threads";
  }
  MemorySpace space() const override { return MemorySpace::kHost; }

  StatusOr<DeviceBuffer> Allocate(size_t bytes, const char* what) override {
    void* p = nullptr;
    const size_t reserved = bytes <= kMaxAllocation ? ReservedBytes(bytes) : 0;
    if (reserved == 0) {
      // Too large: p stays null.
    } else if (reserved >= kMapMinBytes) {
      p = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) p = nullptr;
    } else {
      p = std::aligned_alloc(kAlignment, reserved);
    }
    if (p == nullptr) {
      return ResourceExhausted("[cpu] cannot allocate " + std::to_string(bytes) + " bytes for " +
                               (what ? what : "a buffer"));
    }
    return DeviceBuffer(this, p, bytes);
  }

  size_t FreeMemory() const override { return AvailableMemory(); }

  void CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    if (bytes > 0) std::memcpy(device_dst, host_src, bytes);
  }
  void CopyToHost(void* host_dst, const void* device_src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host_dst, device_src, bytes);
  }
  void CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) override {
    if (bytes > 0) std::memcpy(device_dst, device_src, bytes);
  }
  // Every copy and op has finished when its call returns.
  void Sync() override {}

  // Kernels read the checkpoint mapping in place.
  Status PlaceWeights(Gemma4Weights& weights) override { return Status::Ok(); }

  Ops& ops() override { return *ops_; }

 protected:
  void Free(void* data, size_t bytes) override {
    const size_t reserved = ReservedBytes(bytes);
    if (reserved >= kMapMinBytes) {
      G4_CHECK_MSG(munmap(data, reserved) == 0, "[cpu] munmap failed");
    } else {
      std::free(data);
    }
  }

 private:
  std::unique_ptr<Ops> ops_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace g4
