// libFuzzer target: the --kv SPEC parser (kv/kv_scheme.h). Any byte string
// must give a Status or a scheme, never crash or throw; errors carry "[kv] ";
// an accepted scheme parses the same way twice, builds a KV pool for a small
// Gemma 4 geometry (or says why not, with "[kv]"), and projects a finite,
// positive byte count for a 32k-token context.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "fuzz_kv_config.h"
#include "kv/kv_pool.h"
#include "kv/kv_scheme.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const g4::Gemma4Config config = g4::fuzz::SmallKvConfig();
  static const std::unique_ptr<g4::Backend> backend = g4::MakeCpuBackend();
  const std::string spec(reinterpret_cast<const char*>(data), size);
  auto scheme = g4::KvScheme::Parse(spec);
  if (!scheme.ok()) {
    if (scheme.status().message().rfind("[kv] ", 0) != 0) __builtin_trap();
    return 0;
  }
  auto again = g4::KvScheme::Parse(spec);
  if (!again.ok() || !(*again == *scheme) || again->signature() != scheme->signature()) __builtin_trap();
  if (scheme->full.delay < -1 || scheme->sliding.delay < -1) __builtin_trap();
  g4::KvPoolOptions options;  // no blocks: the formats only
  auto pool = g4::KvPool::Create(config, *scheme, *backend, options);
  if (!pool.ok()) {
    if (pool.status().message().find("[kv]") == std::string::npos) __builtin_trap();
    return 0;
  }
  const size_t bytes = (*pool)->ProjectedBytes(32768);
  if (bytes == 0) __builtin_trap();
  return 0;
}
