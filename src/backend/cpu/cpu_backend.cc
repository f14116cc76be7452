// CpuBackend: memory, copies and placement for the host.
//
// Allocation: small buffers come from aligned_alloc; large ones from an
// anonymous private mapping, whose pages the kernel commits on first touch,
// so a KV pool or activation arena sized for the worst case costs only what
// is written (Backend::Allocate's contract). Both are aligned to kAlignment.
#include "backend/cpu/cpu_backend.h"

#include <cpuid.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_variants.h"
#include "backend/cpu/thread_pool.h"
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

// What each variant's kernels use, for Describe().
const char* KernelsDetail(CpuKernels k) {
  switch (k) {
    case CpuKernels::kAvx512:
      return "AVX-512 + VNNI int8 dot products";
    case CpuKernels::kAvx2:
      return "AVX2 + FMA";
    default:
      return "SSE4.2, auto-vectorized";
  }
}

std::unique_ptr<Ops> MakeOps(CpuKernels k) {
  switch (k) {
    case CpuKernels::kAvx512:
      return cpu::avx512::MakeCpuOps();
    case CpuKernels::kAvx2:
      return cpu::avx2::MakeCpuOps();
    default:
      return cpu::baseline::MakeCpuOps();
  }
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuKernels kernels) : kernels_(kernels), ops_(MakeOps(kernels)) {}

  std::string name() const override { return "cpu"; }
  std::string Describe() const override {
    return std::string("cpu: ") + CpuKernelsName(kernels_) + " kernels (" + KernelsDetail(kernels_) + "), " +
           std::to_string(cpu::TeamSize()) + " threads, spin " + std::to_string(cpu::TeamSpinMicros()) +
           " us";
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
  CpuKernels kernels_;
  std::unique_ptr<Ops> ops_;
};

}  // namespace

const char* CpuKernelsName(CpuKernels k) {
  switch (k) {
    case CpuKernels::kAuto:
      return "auto";
    case CpuKernels::kBaseline:
      return "baseline";
    case CpuKernels::kAvx2:
      return "avx2";
    case CpuKernels::kAvx512:
      return "avx512";
  }
  return "?";
}

namespace {

// clang 14 (the fuzz build's compiler) rejects "f16c", "lzcnt" and "movbe" in
// __builtin_cpu_supports; there they come from CPUID directly (leaf 1 ECX
// bits 29 and 22, leaf 0x80000001 ECX bit 5). They need no OS support beyond
// what the AVX2 check already requires.
#if defined(__clang__) && __clang_major__ < 15
bool CpuidEcxBit(unsigned leaf, int bit) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(leaf, &a, &b, &c, &d) && ((c >> bit) & 1);
}
bool HasF16cLzcntMovbe() { return CpuidEcxBit(1, 29) && CpuidEcxBit(0x80000001u, 5) && CpuidEcxBit(1, 22); }
#else
bool HasF16cLzcntMovbe() {
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("lzcnt") && __builtin_cpu_supports("movbe");
}
#endif

}  // namespace

bool CpuKernelsSupported(CpuKernels k) {
  // libgcc's checks include the OS side (XGETBV: the YMM / ZMM state is
  // saved on context switches), not only the CPUID bits.
  __builtin_cpu_init();
  switch (k) {
    case CpuKernels::kAuto:
    case CpuKernels::kBaseline:
      return true;
    case CpuKernels::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt") && HasF16cLzcntMovbe();
    case CpuKernels::kAvx512:
      return CpuKernelsSupported(CpuKernels::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
  }
  return false;
}

CpuKernels AutoCpuKernels() {
  static const CpuKernels picked = [] {
    const CpuKernels order[] = {CpuKernels::kAvx512, CpuKernels::kAvx2, CpuKernels::kBaseline};
    int first = 0;  // the best variant allowed
    if (const char* env = std::getenv("G4_CPU"); env != nullptr && *env != '\0') {
      const std::string want = env;
      first = -1;
      for (int i = 0; i < 3; ++i) {
        if (want == CpuKernelsName(order[i])) first = i;
      }
      if (first < 0) {
        std::fprintf(stderr, "[cpu] G4_CPU=%s is not one of avx512, avx2, baseline; ignored\n", env);
        first = 0;
      } else if (!CpuKernelsSupported(order[first])) {
        std::fprintf(stderr, "[cpu] G4_CPU=%s: this CPU cannot run those kernels\n", env);
      }
    }
    for (int i = first; i < 3; ++i) {
      if (CpuKernelsSupported(order[i])) return order[i];
    }
    return CpuKernels::kBaseline;
  }();
  return picked;
}

std::unique_ptr<Backend> MakeCpuBackend(CpuKernels kernels) {
  if (kernels == CpuKernels::kAuto) kernels = AutoCpuKernels();
  G4_CHECK_MSG(CpuKernelsSupported(kernels), "[cpu] this CPU cannot run the requested kernels");
  return std::make_unique<CpuBackend>(kernels);
}

}  // namespace g4
