// The CPU backend's worker team: a fixed set of threads that run the
// kernels' parallel loops (replacing OpenMP there, for control over how
// idle workers wait).
//
// Why not OpenMP: a decode step runs hundreds of short parallel ops; an idle
// worker must pick up the next one within a microsecond or two, so it has to
// spin, but libgomp's spin (OMP_WAIT_POLICY unset: up to 300,000 polls per
// wait) makes two processes sharing the cores run many times slower, and
// passive waiting costs a futex wake-up (tens of microseconds) per op. Its
// spin count is read from the environment before main() runs, so a program
// cannot bound it. Here the wait is a bounded spin (G4_SPIN_US microseconds
// of polling, default kDefaultSpinUs, yielding the core between polls after
// the first few), then a futex sleep:
//  - OMP_WAIT_POLICY=passive: no spin (sleep at once), as libgomp;
//  - OMP_WAIT_POLICY=active: spin up to 20 ms;
//  - G4_SPIN_US=N overrides both.
//
// Size: SetTeamSize's, else OMP_NUM_THREADS (its first number) if set,
// else the CPUs this process may run on. OMP_PROC_BIND=close|true|spread pins member t to the
// t-th CPU of the process's affinity mask (spread: every (CPUs / size)-th),
// the calling thread being member 0, as libgomp does; unset or false: no
// pinning.
//
// Threading: RunTeam may be called from any thread; concurrent calls from
// different threads take turns (a mutex). A call from inside a team member
// (nested parallelism) runs with one member, inline.
#pragma once

#include <cstdint>
#include <type_traits>

namespace g4::cpu {

constexpr int kDefaultSpinUs = 100;

// Members of the team (the caller included), >= 1.
int TeamSize();

// Sets the team's size (g4's -t) in place of OMP_NUM_THREADS or the CPU
// count; n is clamped to [1, 1024]. Takes effect while the team has not run
// a job yet; later its workers exist and keep their number, and the call
// returns false unless n is that number.
bool SetTeamSize(int n);

// Calls fn(ctx, t, n) for t = 0 .. n-1 on n = min(max_members, TeamSize())
// members, t = 0 on the calling thread, and returns when every call has.
// Memory written by the members before they return is visible to the
// caller afterwards (and the caller's writes before the call to them).
using TeamFn = void (*)(void* ctx, int t, int n);
void RunTeam(int max_members, TeamFn fn, void* ctx);

// fn(t, n) as above, for any callable.
template <typename F>
void RunTeam(int max_members, F&& f) {
  using Fn = std::remove_reference_t<F>;
  RunTeam(
      max_members, +[](void* c, int t, int n) { (*static_cast<Fn*>(c))(t, n); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Spin budget in microseconds the team currently uses (for Describe()).
int TeamSpinMicros();

}  // namespace g4::cpu
