// Kernel-level timing inside a launcher, for G4_CUDA_PROFILE=1 runs only:
// SubProfile scope(stream, "name") waits for the stream before and after
// and adds the time to a process-wide table printed at exit. Off, it costs
// one cached getenv per scope.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace g4::cuda {

class SubProfileTable {
 public:
  static SubProfileTable& Get() {
    static SubProfileTable t;
    return t;
  }
  static bool Enabled() {
    static const bool on = std::getenv("G4_CUDA_PROFILE") != nullptr;
    return on;
  }
  void Add(const char* name, double s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& e = rows_[name];
    e.first += s;
    ++e.second;
  }
  ~SubProfileTable() {
    for (const auto& [name, e] : rows_)
      std::fprintf(stderr, "[cuda kernels] %-28s %9.3f ms %7lld calls %8.1f us/call\n", name.c_str(), e.first * 1e3,
                   e.second, e.first * 1e6 / e.second);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<double, long long>> rows_;
};

class SubProfile {
 public:
  SubProfile(cudaStream_t s, const char* name) : s_(s), name_(name), on_(SubProfileTable::Enabled()) {
    if (!on_) return;
    cudaStreamSynchronize(s_);
    t0_ = std::chrono::steady_clock::now();
  }
  ~SubProfile() {
    if (!on_) return;
    cudaStreamSynchronize(s_);
    SubProfileTable::Get().Add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  cudaStream_t s_;
  const char* name_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace g4::cuda
