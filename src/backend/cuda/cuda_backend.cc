// CudaBackend: memory, copies, placement and the stream for one GPU.
//
// Copies to the device go through a pinned staging buffer when they fit, so
// they are truly asynchronous (a copy from pageable memory would wait for
// the stream first); the buffer is reused after each Sync. Copies to the
// host land in the caller's memory by the next Sync.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "core/byte_size.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/env_switch.h"
#include "core/check.h"

namespace g4 {
namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kStagingBytes = size_t{64} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    G4_CUDA_CHECK(cudaSetDevice(0));
    G4_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    G4_CUDA_CHECK(cudaGetDeviceProperties(&props_, 0));
    if (cudaMallocHost(&staging_, kStagingBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      staging_ = nullptr;  // copies fall back to pageable transfers
    }
    ops_ = cuda::MakeCudaOps(*this, stream_, [this] { ForgetRecordings(); });
    graphs_enabled_ = cuda::EnvSwitchOn("G4_CUDA_GRAPHS") && std::getenv("G4_CUDA_PROFILE") == nullptr;
  }
  ~CudaBackend() override {
    ForgetRecordings();
    ops_.reset();
    weights_.clear();
    cudaStreamSynchronize(stream_);
    if (staging_) cudaFreeHost(staging_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string Describe() const override {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    return std::string("cuda: ") + props_.name + ", " + std::to_string(props_.multiProcessorCount) + " SMs, " +
           GiB(props_.totalGlobalMem) + ", compute " + std::to_string(props_.major) + "." +
           std::to_string(props_.minor) + ", driver " + std::to_string(driver / 1000) + "." +
           std::to_string(driver % 1000 / 10) + ", runtime " + std::to_string(runtime / 1000) + "." +
           std::to_string(runtime % 1000 / 10) + ", sm_90a kernels, f32 activations";
  }
  MemorySpace space() const override { return MemorySpace::kDevice; }

  StatusOr<DeviceBuffer> Allocate(size_t bytes, const char* what) override {
    void* p = nullptr;
    const size_t n = bytes > (size_t{1} << 52) ? 0 : RoundUp(bytes == 0 ? 1 : bytes, kAlignment);
    if (n == 0 || cudaMalloc(&p, n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the allocation error
      return ResourceExhausted("[cuda] cannot allocate " + std::to_string(bytes) + " bytes of device memory for " +
                               (what ? what : "a buffer") + " (" + GiB(FreeMemory()) + " free)");
    }
    return DeviceBuffer(this, p, bytes);
  }

  size_t FreeMemory() const override {
    size_t free = 0, total = 0;
    G4_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }

  void CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    if (bytes == 0) return;
    if (staging_ && bytes <= kStagingBytes) {
      if (staged_ + bytes > kStagingBytes) Sync();  // the staging buffer is still being read
      char* s = static_cast<char*>(staging_) + staged_;
      std::memcpy(s, host_src, bytes);
      staged_ = RoundUp(staged_ + bytes, 64);
      G4_CUDA_CHECK(cudaMemcpyAsync(device_dst, s, bytes, cudaMemcpyHostToDevice, stream_));
      return;
    }
    G4_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void CopyToHost(void* host_dst, const void* device_src, size_t bytes) override {
    if (bytes > 0) G4_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  void CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) override {
    if (bytes > 0) G4_CUDA_CHECK(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void Sync() override {
    G4_CUDA_CHECK(cudaStreamSynchronize(stream_));
    staged_ = 0;
  }

  // One device allocation holds every matrix (still packed) and vector,
  // each at a 256-byte boundary; the views are repointed into it.
  Status PlaceWeights(Gemma4Weights& weights) override {
    struct Piece {
      const void** ptr;  // the view's pointer, repointed after the upload
      size_t bytes;
      size_t offset;
    };
    std::vector<Piece> pieces;
    size_t total = 0;
    auto add = [&](const void** ptr, size_t bytes) {
      if (*ptr == nullptr || bytes == 0) return;
      pieces.push_back({ptr, bytes, total});
      total += RoundUp(bytes, kAlignment);
    };
    std::string unsupported;
    weights.ForEachTensor(
        [&](const std::string& name, WeightMatrix& m) {
          if (m.is_affine()) {
            const size_t sb = static_cast<size_t>(m.rows) * m.groups_per_row() * DTypeSize(m.scale_dtype);
            add(reinterpret_cast<const void**>(&m.codes), static_cast<size_t>(m.rows) * m.words_per_row() * 4);
            add(&m.scales, sb);
            add(&m.biases, sb);
          } else {
            add(&m.data, m.StoredBytes());
          }
        },
        [&](const std::string&, const float*& data, int64_t n) {
          add(reinterpret_cast<const void**>(&data), static_cast<size_t>(n) * sizeof(float));
        });
    if (total == 0) return Status::Ok();
    StatusOr<DeviceBuffer> arena = Allocate(total, "weights");
    if (!arena.ok()) {
      return ResourceExhausted("[cuda] the weights need " + GiB(total) + " of device memory, " + GiB(FreeMemory()) +
                               " free");
    }
    char* base = arena->as<char>();
    for (const Piece& p : pieces) {
      G4_CUDA_CHECK(cudaMemcpy(base + p.offset, *p.ptr, p.bytes, cudaMemcpyHostToDevice));
      *p.ptr = base + p.offset;
    }
    weights_.push_back(std::move(arena).value());
    return Status::Ok();
  }

  Ops& ops() override { return *ops_; }

  // Recordings are CUDA graphs of the stream's work between Begin and End.
  // The first time a key is seen the ops run normally (they size their
  // scratch memory then); the second time they are captured.
  bool BeginCapture(uint64_t key) override {
    if (!graphs_enabled_ || capturing_) return false;
    if (seen_.insert(key).second) return false;
    G4_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    capture_key_ = key;
    return true;
  }
  void EndCapture() override {
    G4_CHECK_MSG(capturing_, "[cuda] EndCapture without BeginCapture");
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    G4_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    G4_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    G4_CUDA_CHECK(cudaGraphDestroy(graph));
    graphs_[capture_key_] = exec;
    G4_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
  }
  bool Replay(uint64_t key) override {
    if (capturing_) return false;
    auto it = graphs_.find(key);
    if (it == graphs_.end()) return false;
    G4_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    return true;
  }

 protected:
  void Free(void* data, size_t bytes) override {
    // Recordings may name this memory.
    ForgetRecordings();
    // cudaFree waits for the device: nothing queued can still use `data`.
    G4_CUDA_CHECK(cudaFree(data));
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaDeviceProp props_{};
  void* staging_ = nullptr;
  size_t staged_ = 0;
  void ForgetRecordings() {
    if (graphs_.empty()) return;
    G4_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
    seen_.clear();
  }

  std::unique_ptr<Ops> ops_;
  std::vector<DeviceBuffer> weights_;
  bool graphs_enabled_ = true;
  bool capturing_ = false;
  uint64_t capture_key_ = 0;
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace

bool CudaDeviceAvailable() {
  static const bool available = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e == cudaSuccess && n > 0;
  }();
  return available;
}

std::unique_ptr<Backend> MakeCudaBackend() {
  G4_CHECK_MSG(CudaDeviceAvailable(), "[cuda] no CUDA device");
  return std::make_unique<CudaBackend>();
}

}  // namespace g4
