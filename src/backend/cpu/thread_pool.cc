// The worker team of thread_pool.h.
//
// One job at a time: the caller publishes (fn, ctx, n), bumps `generation_`
// and runs member 0; members 1..n-1 run theirs, and every worker (members
// past n too, so that none still reads the job when the next is published)
// counts `pending_` down; the last one bumps `done_`. Waiting, on either
// side, is a bounded spin on the word that will change, then a futex sleep
// on it; a sleeper announces itself first (`sleepers_`, `caller_sleeps_`) so
// the other side knows a wake-up call is needed (all in sequentially
// consistent order, so a sleeper either sees the change before sleeping or
// is woken).
#include "backend/cpu/thread_pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace g4::cpu {
namespace {

using Clock = std::chrono::steady_clock;

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// Polls `ready` for up to spin_us microseconds: pause instructions for the
// first microseconds (the next op usually comes within a few), then with a
// sched_yield between polls, so that under contention for the cores the
// spinning thread hands its core to whoever has work. True once ready.
template <typename Ready>
bool Spin(int spin_us, Ready&& ready) {
  if (spin_us <= 0) return ready();
  const Clock::time_point start = Clock::now();
  const auto quiet = std::chrono::microseconds(std::min(spin_us, 4));
  const auto limit = std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      _mm_pause();
    }
    const auto spent = Clock::now() - start;
    if (spent >= limit) return ready();
    if (spent >= quiet) sched_yield();
  }
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && n >= 0 && n <= INT_MAX ? static_cast<int>(n) : fallback;
}

std::string EnvLower(const char* name) {
  const char* v = std::getenv(name);
  std::string s = v ? v : "";
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

int SpinMicrosFromEnv() {
  const std::string policy = EnvLower("OMP_WAIT_POLICY");
  int spin = kDefaultSpinUs;
  if (policy == "passive") spin = 0;
  if (policy == "active") spin = 20000;
  return EnvInt("G4_SPIN_US", spin);
}

// The CPUs this process may run on, in order. With OMP_PROC_BIND set,
// libgomp has already pinned the initial thread to its first place, so the
// thread's own mask would say one CPU: OpenMP's place list, which covers
// the mask the process started with, is asked first.
std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  const int places = omp_get_num_places();
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
    if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
    cpus.insert(cpus.end(), ids.begin(), ids.end());
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  if (!cpus.empty()) return cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

int SizeFromEnv(int allowed) {
  // OMP_NUM_THREADS may be a list ("4,2"); its first number is the team size.
  const int n = EnvInt("OMP_NUM_THREADS", 0);
  if (n > 0) return std::min(n, 1024);
  if (allowed > 0) return allowed;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

void PinTo(pthread_t thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(thread, sizeof(set), &set);
}

thread_local bool tls_in_team = false;

class Team {
 public:
  Team() : spin_us_(SpinMicrosFromEnv()), cpus_(AllowedCpus()) {
    SetSize(SizeFromEnv(static_cast<int>(cpus_.size())));
  }

  int size() const { return size_; }

  // A new size, while no worker exists yet.
  bool Resize(int n) {
    std::lock_guard<std::mutex> lock(submit_);
    if (started_) return n == size_;
    SetSize(std::min(std::max(n, 1), 1024));
    return true;
  }
  int spin_us() const { return spin_us_; }

  void Run(int n, TeamFn fn, void* ctx) {
    std::lock_guard<std::mutex> lock(submit_);
    StartWorkers();
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    pending_.store(size_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&generation_);
    tls_in_team = true;
    fn(ctx, 0, n);
    tls_in_team = false;
    auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
    if (Spin(spin_us_, finished)) return;
    for (;;) {
      caller_sleeps_.store(1, std::memory_order_seq_cst);
      const uint32_t d = done_.load(std::memory_order_seq_cst);
      if (finished()) break;
      FutexWait(&done_, d);
    }
    caller_sleeps_.store(0, std::memory_order_relaxed);
  }

 private:
  void StartWorkers() {
    if (started_) return;
    started_ = true;
    if (!place_.empty()) PinTo(pthread_self(), place_[0]);
    for (int t = 1; t < size_; ++t) {
      std::thread th([this, t] { WorkerLoop(t); });
      if (!place_.empty()) PinTo(th.native_handle(), place_[t]);
      th.detach();  // the team lives as long as the process
    }
  }

  void WorkerLoop(int t) {
    tls_in_team = true;
    uint32_t seen = 0;
    for (;;) {
      auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!Spin(spin_us_, changed)) {
        for (;;) {
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          if (changed()) {
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
            break;
          }
          FutexWait(&generation_, seen);
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          if (changed()) break;
        }
      }
      seen = generation_.load(std::memory_order_acquire);
      const int n = n_;
      if (t < n) fn_(ctx_, t, n);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        done_.fetch_add(1, std::memory_order_seq_cst);
        if (caller_sleeps_.load(std::memory_order_seq_cst)) FutexWakeAll(&done_);
      }
    }
  }

  void SetSize(int n) {
    size_ = n;
    place_.clear();
    const std::string bind = EnvLower("OMP_PROC_BIND");
    const bool close = bind == "close" || bind == "true" || bind == "master" || bind == "primary";
    const bool spread = bind == "spread";
    if ((close || spread) && !cpus_.empty()) {
      const int stride = spread ? std::max<int>(1, static_cast<int>(cpus_.size()) / size_) : 1;
      for (int t = 0; t < size_; ++t) place_.push_back(cpus_[(t * stride) % cpus_.size()]);
    }
  }

  const int spin_us_;
  const std::vector<int> cpus_;
  int size_ = 1;
  std::vector<int> place_;  // CPU of each member, when pinning
  bool started_ = false;
  std::mutex submit_;
  // The current job (written by the caller before `generation_` is bumped).
  TeamFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int n_ = 0;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<uint32_t> done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> caller_sleeps_{0};
};

Team& TheTeam() {
  static Team* team = new Team;  // never destroyed: workers may outlive static destructors
  return *team;
}

}  // namespace

int TeamSize() { return TheTeam().size(); }

bool SetTeamSize(int n) { return TheTeam().Resize(n); }

int TeamSpinMicros() { return TheTeam().spin_us(); }

void RunTeam(int max_members, TeamFn fn, void* ctx) {
  Team& team = TheTeam();
  const int n = std::max(1, std::min(max_members, team.size()));
  if (n == 1 || tls_in_team) {
    fn(ctx, 0, 1);
    return;
  }
  team.Run(n, fn, ctx);
}

}  // namespace g4::cpu
