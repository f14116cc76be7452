// libFuzzer target: loading a .g4kv file (kv/kv_file.h) into KV pools of a
// small Gemma 4 geometry. Any file must give a Status or a sequence, never a
// crash; errors carry "[kv]"; a loaded sequence has as many tokens as its
// ids.
//
// Input: byte 0 picks the pool's scheme (bits 0-1) and whether the harness
// first repairs the file's checksums (bit 2): with them repaired, mutations
// of the header and the records get past the CRCs and reach the JSON header
// checks and KvPool::Import, which random bytes would almost never do. The
// rest is the file.
//
// Seeds: G4_FUZZ_WRITE_SEEDS=DIR fuzz_kv_file writes one saved sequence per
// scheme to DIR and exits (fuzz/corpus/kv_file/ was made that way);
// G4_FUZZ_VERBOSE=1 prints each input's outcome (e.g. with -runs=0 on the
// seeds: each must load).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "fuzz_kv_config.h"
#include "kv/checksum.h"
#include "kv/kv_file.h"
#include "kv/kv_pool.h"
#include "kv/kv_scheme.h"

namespace {

const char* const kSchemes[4] = {"plain", "affine:4:32", "turbo:k8v3@8", "sliding=affine:8,full=plain:bf16"};
const g4::KvFileIdentity kIdentity{"0123456789abcdef", "tok-1"};

struct Harness {
  g4::Gemma4Config config = g4::fuzz::SmallKvConfig();
  std::unique_ptr<g4::Backend> backend = g4::MakeCpuBackend();
  std::unique_ptr<g4::KvPool> pools[4];
  int fd = -1;
  std::string path;  // the input, as a file (memfd: no disk)

  Harness() {
    for (int i = 0; i < 4; ++i) {
      g4::KvPoolOptions o;
      o.block_size = 16;
      for (auto& g : o.capacity_blocks) g[0] = g[1] = 16;
      auto p = g4::KvPool::Create(config, *g4::KvScheme::Parse(kSchemes[i]), *backend, o);
      if (!p.ok()) std::abort();
      pools[i] = std::move(p).value();
    }
    fd = ::memfd_create("g4kv", 0);
    if (fd < 0) std::abort();
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  void SetFile(const uint8_t* data, size_t size) {
    if (::ftruncate(fd, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
};

Harness& H() {
  static Harness* h = new Harness();
  return *h;
}

uint32_t GetU32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint64_t GetU64(const uint8_t* p) { return GetU32(p) | static_cast<uint64_t>(GetU32(p + 4)) << 32; }
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the layer CRCs named in the header (when it parses), the header
// CRC and the preamble CRC (kv_file.h's layout), so the loader sees a file
// whose checksums hold whatever else is wrong with it.
void RepairChecksums(std::vector<uint8_t>& f) {
  if (f.size() < 64) return;
  const uint64_t off = GetU64(&f[16]);
  if (off > f.size()) return;
  uint64_t len = std::min<uint64_t>(GetU64(&f[24]), f.size() - off);
  std::string text(reinterpret_cast<const char*>(&f[off]), len);
  auto header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_object() && header.contains("layers") && header["layers"].is_array()) {
    for (auto& l : header["layers"]) {
      if (!l.is_object() || !l.contains("offset") || !l.contains("bytes")) continue;
      if (!l["offset"].is_number_unsigned() || !l["bytes"].is_number_unsigned()) continue;
      const uint64_t o = l["offset"], b = l["bytes"];
      if (o > f.size() || b > f.size() - o) continue;
      char hex[9];
      std::snprintf(hex, sizeof hex, "%08x", g4::Crc32c(&f[o], b));
      l["crc32c"] = hex;
    }
    text = header.dump();
    f.resize(off);
    f.insert(f.end(), text.begin(), text.end());
    len = text.size();
    PutU64(&f[24], len);
  }
  PutU32(&f[32], g4::Crc32c(&f[off], len));
  PutU32(&f[40], g4::Crc32c(f.data(), 40));
}

void WriteSeeds(const char* dir) {
  Harness& h = H();
  for (int i = 0; i < 4; ++i) {
    g4::KvPool& pool = *h.pools[i];
    g4::KvSeq seq = pool.NewSequence();
    // Bookkeeping only: the records' bytes do not matter to the loader.
    while (seq.length() < 12) {
      if (!pool.Maintain(seq).ok()) std::abort();
      const int64_t n = std::min<int64_t>(5, std::min<int64_t>(12 - seq.length(), pool.max_append_tokens(seq)));
      if (!pool.PrepareAppend(seq, n).ok()) std::abort();
      pool.Commit(seq, n);
    }
    std::vector<int32_t> ids;
    for (int t = 0; t < 12; ++t) ids.push_back(7 * t + i);
    const std::string tmp = std::string(dir) + "/tmp.g4kv";
    if (!g4::SaveKvFile(tmp, pool, seq, kIdentity, ids).ok()) std::abort();
    std::ifstream in(tmp, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    ::unlink(tmp.c_str());
    for (int repair = 0; repair < 2; ++repair) {
      std::ofstream out(std::string(dir) + "/" + std::to_string(i) + (repair ? "-repaired" : "") + ".bin",
                        std::ios::binary);
      out.put(static_cast<char>(i | (repair << 2)));
      out << bytes;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("G4_FUZZ_WRITE_SEEDS")) {
    WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Harness& h = H();
  g4::KvPool& pool = *h.pools[data[0] & 3];
  std::vector<uint8_t> file(data + 1, data + size);
  if (data[0] & 4) RepairChecksums(file);
  h.SetFile(file.data(), file.size());
  auto loaded = g4::LoadKvFile(h.path, pool, kIdentity);
  static const bool verbose = std::getenv("G4_FUZZ_VERBOSE") != nullptr;  // to check the seeds load
  if (verbose)
    std::fprintf(stderr, "%s\n", loaded.ok() ? ("loaded " + std::to_string(loaded->tokens.size()) + " tokens").c_str()
                                              : loaded.status().ToString().c_str());
  if (!loaded.ok()) {
    if (loaded.status().message().find("[kv]") == std::string::npos) __builtin_trap();
    return 0;
  }
  if (pool.length(loaded->seq) != static_cast<int64_t>(loaded->tokens.size())) __builtin_trap();
  // The sequence is released with `loaded`, so the next input finds the pool empty.
  return 0;
}
