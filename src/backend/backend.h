// Backend: a compute device as g4 sees it. It owns its memory (allocation,
// copies between host and device), one in-order stream of work with a sync
// point, the placement of weights, and the ops (ops.h) that run on that
// stream. The CPU backend (backend/cpu) runs everything at once on the
// calling thread's OpenMP team; a device backend (backend/cuda) queues work.
//
// Ordering: every copy and op issued through one backend runs in issue
// order. Host memory handed to CopyToDevice must stay valid, and host memory
// written by CopyToHost may only be read, after the next Sync().
//
// Threading: one thread drives a backend at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "backend/tensor.h"
#include "core/status.h"
#include "io/gemma4_weights.h"

namespace g4 {

class Backend;
class Ops;

// Memory from Backend::Allocate; frees itself. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* owner, void* data, size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void Reset();

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // One line for logs and `g4 bench`: device, kernels picked, threads.
  virtual std::string Describe() const = 0;
  // Where Allocate's memory lives (kHost for the CPU backend).
  virtual MemorySpace space() const = 0;

  // `bytes` of device memory, aligned to at least 256 bytes, contents
  // unspecified. ResourceExhausted when it cannot be had. The CPU backend
  // commits pages lazily (the OS maps them on first touch), so a large
  // reservation costs only what is written.
  virtual StatusOr<DeviceBuffer> Allocate(size_t bytes, const char* what) = 0;
  // Device memory still free, in bytes (the CPU backend: physical memory
  // available). For sizing KV pools.
  virtual size_t FreeMemory() const = 0;
  // Bytes of the buffers Allocate handed out that are still held (a device
  // backend's placed weights included; the CPU backend's mapped checkpoint
  // is not Allocate's). For `--gpu-memory`.
  size_t HeldBytes() const { return held_bytes_.load(std::memory_order_relaxed); }

  virtual void CopyToDevice(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) = 0;
  // Waits until everything issued so far has finished.
  virtual void Sync() = 0;

  // Makes every tensor of `weights` readable by this backend's ops, once,
  // through Gemma4Weights::ForEachTensor: the CPU backend leaves them where
  // they are (mapped, zero-copy); a device backend uploads each matrix as
  // stored (still packed) and repoints the views at device memory. The
  // weights object must outlive the backend's use of it.
  virtual Status PlaceWeights(Gemma4Weights& weights) = 0;

  virtual Ops& ops() = 0;

  // Recording and replaying a step (a CUDA graph): the ops issued between
  // BeginCapture(key) and EndCapture() are recorded, then run; a later
  // Replay(key) runs the recording again with the same arguments, reading
  // whatever the step's buffers hold then. The caller promises that every
  // op's arguments (shapes, pointers, scalars) are a function of `key`, and
  // issues no copies between Begin and End. BeginCapture may decline (false:
  // issue the ops normally, nothing is recorded); Replay returns false when
  // it has no recording for `key`. Freeing memory of this backend forgets
  // every recording. The default backend declines everything.
  virtual bool BeginCapture(uint64_t key) { return false; }
  virtual void EndCapture() {}
  virtual bool Replay(uint64_t key) { return false; }

 protected:
  friend class DeviceBuffer;
  virtual void Free(void* data, size_t bytes) = 0;

 private:
  std::atomic<size_t> held_bytes_{0};  // kept by DeviceBuffer
};

inline DeviceBuffer::DeviceBuffer(Backend* owner, void* data, size_t bytes)
    : owner_(owner), data_(data), bytes_(bytes) {
  if (owner_ && data_) owner_->held_bytes_.fetch_add(bytes_, std::memory_order_relaxed);
}

inline DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    owner_ = std::exchange(o.owner_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

inline void DeviceBuffer::Reset() {
  if (owner_ && data_) {
    owner_->held_bytes_.fetch_sub(bytes_, std::memory_order_relaxed);
    owner_->Free(data_, bytes_);
  }
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

// Uploads `n` host values into a new device buffer (constants: RoPE tables,
// codebooks). Synchronizes, so `host` may be freed on return.
StatusOr<DeviceBuffer> UploadConstant(Backend& backend, const void* host, size_t bytes, const char* what);

}  // namespace g4
