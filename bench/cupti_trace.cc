// A CUPTI kernel tracer loaded into any CUDA process by the driver
// (CUDA_INJECTION64_PATH=libg4_cupti_trace.so): the device's start and end
// time of every kernel, CUDA graph replays included, so what a decode step
// spends inside its graph (kernels and the gaps between them) can be read
// without serializing kernels as Nsight Compute does. At exit it writes one
// line per kernel to $G4_TRACE_OUT (default g4-trace.tsv):
//   start_ns <tab> end_ns <tab> graph_id <tab> grid x*y*z <tab> demangled name
// in start order. scripts/gpu-run.sh `trace` runs it and sums the last
// decode step by kernel.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  uint64_t start, end;
  uint32_t graph;
  int32_t gx, gy, gz;
  std::string name;
};

std::mutex g_mu;
std::vector<KernelRecord>* g_records = nullptr;  // leaked: read at exit
constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    g_records->push_back(KernelRecord{k->start, k->end, k->graphId, k->gridX, k->gridY, k->gridZ,
                                      k->name ? k->name : "?"});
  }
  std::free(buffer);
}

void WriteTrace() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<KernelRecord>& r = *g_records;
  std::sort(r.begin(), r.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start < b.start; });
  const char* path = std::getenv("G4_TRACE_OUT");
  FILE* f = std::fopen(path && *path ? path : "g4-trace.tsv", "w");
  if (f == nullptr) {
    std::perror("[cupti_trace] cannot write the trace");
    return;
  }
  for (const KernelRecord& k : r) {
    int status = 0;
    char* plain = abi::__cxa_demangle(k.name.c_str(), nullptr, nullptr, &status);
    std::fprintf(f, "%llu\t%llu\t%u\t%d*%d*%d\t%s\n", static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.graph, k.gx, k.gy, k.gz,
                 status == 0 && plain ? plain : k.name.c_str());
    std::free(plain);
  }
  std::fclose(f);
  std::fprintf(stderr, "[cupti_trace] %zu kernels\n", r.size());
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH).
extern "C" int InitializeInjection() {
  g_records = new std::vector<KernelRecord>();
  g_records->reserve(1 << 20);
  if (cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "[cupti_trace] CUPTI activity tracing unavailable\n");
    return 0;
  }
  std::atexit(WriteTrace);
  return 1;
}
