// A SIMT emulator for testing CUDA kernels on the CPU: a block's threads
// run as fibers on one OS thread (entered once through ucontext, then
// switched with _setjmp/_longjmp), blocks one after another. Warp
// collectives (shuffles, reductions, mma, ldmatrix) and __syncthreads are
// rendezvous: a thread deposits its operands and yields until every live
// thread of its warp (block) has arrived; the last to arrive computes every
// lane's result. A collective that some live thread never reaches ends in
// a deadlock report. Exact IEEE float32 arithmetic throughout, so the
// emulated tensor-core products are a model of the instruction, not of its
// hardware rounding: tests compare kernels with each other bit for bit and
// with a reference within a tolerance. Test-only.
#pragma once

#include <setjmp.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace simt {

constexpr int kLanes = 32;
constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kSlotWords = 16;  // 128 bytes of operands or results per lane

[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "simt: %s\n", what);
  std::abort();
}

struct Fiber {
  ucontext_t ctx{};
  jmp_buf jb{};
  bool started = false, done = false;
  std::unique_ptr<char[]> stack;
  uint3 tid;
  uint64_t waiting_gen = 0;
  int waiting_on = 0;  // 0 none, 1 warp, 2 block
  // cp.async copies in flight: (dst, src, bytes), and the copy count at
  // each commit; they land at the wait that covers their group.
  struct Copy {
    void* dst;
    const void* src;
    size_t n;
  };
  std::vector<Copy> copies;
  std::vector<size_t> groups;
  uint32_t rng = 0;
};

// A rendezvous of a warp or of the block.
struct Gather {
  int live = 0, arrived = 0;
  uint64_t gen = 0;
  int op = -1;
  std::function<void()> compute;
  uint64_t in[kLanes][kSlotWords];
  uint64_t out[kLanes][kSlotWords];
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<Gather>> warps;
  Gather bar;
  std::vector<uint8_t> dynamic_smem;
  int current = -1;
  jmp_buf sched{};
};

inline Block*& CurrentBlock() {
  static Block* b = nullptr;
  return b;
}

}  // namespace simt

// The CUDA built-in variables, set by the scheduler at every switch.
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace simt {

inline Fiber& Me() { return CurrentBlock()->fibers[CurrentBlock()->current]; }
inline int MyLane() { return static_cast<int>(Me().tid.x) % kLanes; }
inline int MyWarp() { return static_cast<int>(Me().tid.x) / kLanes; }

// Back to the scheduler; returns when this fiber is resumed.
inline void Yield() {
  Block* b = CurrentBlock();
  if (_setjmp(Me().jb) == 0) _longjmp(b->sched, 1);
}

// Arrive at g with operands `in` (n words); the last arrival runs
// `compute` (which reads every lane's in and writes every lane's out); then
// copies this lane's m result words to `out`.
inline void Rendezvous(Gather& g, int kind, int op, const void* in, size_t n, void* out, size_t m, int slot,
                       std::function<void()> compute) {
  if (g.arrived == 0) {
    g.op = op;
    g.compute = std::move(compute);
  } else if (g.op != op) {
    Fail("threads of one warp (block) reached different collectives");
  }
  if (n) std::memcpy(g.in[slot], in, n * 8);
  const uint64_t gen = g.gen;
  if (++g.arrived == g.live) {
    g.compute();
    g.arrived = 0;
    ++g.gen;
  } else {
    Me().waiting_on = kind;
    Me().waiting_gen = gen;
    while (g.gen == gen) Yield();
    Me().waiting_on = 0;
  }
  if (m) std::memcpy(out, g.out[slot], m * 8);
}

inline void WarpRendezvous(int op, const void* in, size_t n, void* out, size_t m, std::function<void()> compute) {
  Gather& g = *CurrentBlock()->warps[MyWarp()];
  Rendezvous(g, 1, op, in, n, out, m, MyLane(), std::move(compute));
}

// Runs one block of `threads` threads, each calling body().
inline void RunBlock(const uint3& bid, const dim3& grid, const dim3& block, size_t smem,
                     const std::function<void()>& body) {
  Block b;
  const int threads = static_cast<int>(block.x * block.y * block.z);
  b.fibers.resize(threads);
  const int warps = (threads + kLanes - 1) / kLanes;
  for (int w = 0; w < warps; ++w) {
    b.warps.push_back(std::make_unique<Gather>());
    b.warps.back()->live = std::min(kLanes, threads - w * kLanes);
  }
  b.bar.live = threads;
  // NaN bytes (f32 and bf16) in the memory, so a read of what the block
  // never wrote shows; 64 guard bytes past the end.
  b.dynamic_smem.assign(smem + 64, 0xCD);
  std::memset(b.dynamic_smem.data(), 0xFF, smem);
  Block* saved = CurrentBlock();
  CurrentBlock() = &b;
  blockIdx = bid;
  gridDim = grid;
  blockDim = block;
  static thread_local const std::function<void()>* entry_body;
  entry_body = &body;
  struct Trampoline {
    static void Run() {
      (*entry_body)();
      Block* bb = CurrentBlock();
      Fiber& f = bb->fibers[bb->current];
      f.done = true;
      // The thread leaves its warp and the block: a pending collective may
      // now be complete.
      Gather& w = *bb->warps[f.tid.x / kLanes];
      --w.live;
      --bb->bar.live;
      for (Gather* g : {&w, &bb->bar})
        if (g->arrived > 0 && g->arrived == g->live) {
          g->compute();
          g->arrived = 0;
          ++g->gen;
        }
      _longjmp(bb->sched, 1);
    }
  };
  for (int t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    f.tid = uint3{static_cast<unsigned>(t), 0, 0};
    f.rng = 0x2545f491u * static_cast<uint32_t>(t + 1) + bid.x * 7919u + bid.y * 104729u + bid.z * 15485863u;
    f.stack.reset(new char[kStackBytes]);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, &Trampoline::Run, 0);
  }
  int remaining = threads;
  // Warps progress at uneven rates: each pass lets a pseudo-random half of
  // them run (all of them after a pass without progress), so a missing
  // barrier between warps shows as a wrong result.
  uint32_t rng = 0x9e3779b9u;
  bool all_warps = false;
  std::vector<char> skip(warps, 0);
  while (remaining > 0) {
    bool progress = false;
    for (int w = 0; w < warps; ++w) {
      rng = rng * 1664525u + 1013904223u;
      skip[w] = !all_warps && warps > 1 && (rng >> 31) != 0;
    }
    const bool skipped = std::find(skip.begin(), skip.end(), 1) != skip.end();
    for (int t = 0; t < threads; ++t) {
      Fiber& f = b.fibers[t];
      if (f.done || skip[t / kLanes]) continue;
      const uint64_t before_gen = f.waiting_on == 1   ? b.warps[t / kLanes]->gen
                                  : f.waiting_on == 2 ? b.bar.gen
                                                      : ~uint64_t{0};
      if (f.waiting_on != 0 && before_gen == f.waiting_gen) continue;  // still blocked
      b.current = t;
      threadIdx = f.tid;
      if (_setjmp(b.sched) == 0) {
        if (!f.started) {
          f.started = true;
          ucontext_t here;
          swapcontext(&here, &f.ctx);  // never returns here: the fiber longjmps to sched
        } else {
          _longjmp(f.jb, 1);
        }
      }
      progress = true;
      if (f.done) --remaining;
    }
    if (!progress && !skipped) Fail("deadlock: every live thread waits at a collective that some live thread never reaches");
    all_warps = !progress;
  }
  for (int i = 0; i < 64; ++i)
    if (b.dynamic_smem[smem + i] != 0xCD) Fail("a write past the block's dynamic shared memory");
  CurrentBlock() = saved;
}

// Runs the grid block by block.
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        const std::function<void()> body = [&] {
          std::tuple<std::decay_t<Params>...> copy = params;  // each thread its own parameters
          std::apply(kernel, copy);
        };
        RunBlock(uint3{x, y, z}, grid, block, smem, body);
      }
}

inline void BlockBarrier() {
  Block* b = CurrentBlock();
  Rendezvous(b->bar, 2, 1000, nullptr, 0, nullptr, 0, static_cast<int>(Me().tid.x) % kLanes, [] {});
}

}  // namespace simt
