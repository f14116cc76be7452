// Microbenchmarks of the CUDA backend's MatMul on Gemma 4 shapes, through
// the Ops interface (so the input quantization of affine weights is
// included). Weights: MLX affine 4-bit g64 with BF16 scales, 16 distinct
// copies visited in turn so they come from HBM, not the 50 MB L2. Each
// iteration queues 32 calls and waits once; the time per call is reported
// (manual time), with the weight bytes per second as "bytes_per_second".
// Without a GPU (or a CUDA build) every benchmark reports a skip.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/ops.h"
#include "io/weight_matrix.h"
#ifdef G4_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace g4 {
namespace {

constexpr int kCopies = 16;
constexpr int kCallsPerIteration = 32;

Backend* Gpu() {
#ifdef G4_WITH_CUDA
  static std::unique_ptr<Backend> b = CudaDeviceAvailable() ? MakeCudaBackend() : nullptr;
  return b.get();
#else
  return nullptr;
#endif
}

struct Affine {
  std::vector<DeviceBuffer> buffers;
  std::vector<WeightMatrix> copies;
};

// kCopies random 4-bit g64 matrices of rows x cols on the device.
Affine MakeAffine(Backend& b, int64_t rows, int64_t cols) {
  Affine a;
  const int64_t words = rows * cols / 8, groups = rows * cols / 64;
  std::mt19937 rng(7);
  std::vector<uint32_t> codes(words);
  for (auto& c : codes) c = rng();
  std::vector<uint16_t> sb(2 * groups);
  for (auto& v : sb) v = static_cast<uint16_t>(0x3c00 + rng() % 0x200) | static_cast<uint16_t>((rng() & 1) << 15);
  for (int i = 0; i < kCopies; ++i) {
    DeviceBuffer c = b.Allocate(words * 4, "bench codes").value();
    DeviceBuffer s = b.Allocate(sb.size() * 2, "bench scales").value();
    b.CopyToDevice(c.data(), codes.data(), words * 4);
    b.CopyToDevice(s.data(), sb.data(), sb.size() * 2);
    WeightMatrix w;
    w.format = WeightMatrix::Format::kAffine;
    w.rows = rows;
    w.cols = cols;
    w.bits = 4;
    w.group_size = 64;
    w.codes = c.as<uint32_t>();
    w.scale_dtype = DType::kBF16;
    w.scales = s.data();
    w.biases = static_cast<const uint16_t*>(s.data()) + groups;
    a.copies.push_back(w);
    a.buffers.push_back(std::move(c));
    a.buffers.push_back(std::move(s));
  }
  b.Sync();
  return a;
}

// Args: input rows M, weight rows N, columns K.
void BM_AffineMatMul(benchmark::State& state) {
  Backend* b = Gpu();
  if (b == nullptr) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Affine w = MakeAffine(*b, n, k);
  DeviceBuffer xb = b->Allocate(m * k * 4, "bench x").value(), yb = b->Allocate(m * n * 4, "bench y").value();
  std::vector<float> x(m * k);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  b->CopyToDevice(xb.data(), x.data(), x.size() * 4);
  TensorView xv{xb.data(), DType::kF32, m, k, k, MemorySpace::kDevice};
  TensorView yv{yb.data(), DType::kF32, m, n, n, MemorySpace::kDevice};
  for (int i = 0; i < kCopies; ++i) b->ops().MatMul(xv, w.copies[i], yv);  // warm-up, scratch sizing
  b->Sync();
  int next = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerIteration; ++i) b->ops().MatMul(xv, w.copies[next++ % kCopies], yv);
    b->Sync();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s / kCallsPerIteration);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.copies[0].StoredBytes()));
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations(), benchmark::Counter::kIsRate);
}

// E4B (hidden 2560, MLP 10240), 12B (hidden 3840, MLP 15360; q/k/v 8192 rows, o
// 3840 x 4096), 31B (hidden 5376: down 5376 x 21504, gate and up 43008 x
// 5376, sliding q/k/v 16384 x 5376, o 5376 x 8192), the head.
BENCHMARK(BM_AffineMatMul)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Args({1, 10240, 2560})
    ->Args({1, 2560, 10240})
    ->Args({1, 2048, 2560})
    ->Args({1, 15360, 3840})
    ->Args({1, 3840, 15360})
    ->Args({1, 262144, 2560})
    ->Args({2, 10240, 2560})
    ->Args({4, 10240, 2560})
    ->Args({8, 10240, 2560})
    ->Args({8, 2048, 2560})
    ->Args({32, 2048, 2560})
    ->Args({32, 10240, 2560})
    ->Args({32, 8192, 3840})
    ->Args({32, 3840, 4096})
    ->Args({32, 3840, 15360})
    ->Args({32, 15360, 3840})
    ->Args({32, 5376, 21504})
    ->Args({32, 43008, 5376})
    ->Args({32, 16384, 5376})
    ->Args({32, 5376, 8192})
    ->Args({64, 10240, 2560})
    ->Args({512, 10240, 2560})
    ->Args({4096, 10240, 2560})
    ->Args({4096, 2560, 10240})
    ->Args({4096, 15360, 3840});

}  // namespace
}  // namespace g4

BENCHMARK_MAIN();
