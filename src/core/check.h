// G4_CHECK: always-on invariant checks for conditions that only a g4 bug can
// break. Input from users or files is validated with Status instead, never
// with a check.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace g4::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond, const char* msg) {
  std::fprintf(stderr, "g4: internal check failed at %s:%d: %s %s\n", file, line, cond, msg);
  std::abort();
}
}  // namespace g4::internal

#define G4_CHECK(cond)                                                   \
  do {                                                                   \
    if (!(cond)) ::g4::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define G4_CHECK_MSG(cond, msg)                                            \
  do {                                                                     \
    if (!(cond)) ::g4::internal::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)

#ifdef NDEBUG
#define G4_DCHECK(cond) ((void)0)
#else
#define G4_DCHECK(cond) G4_CHECK(cond)
#endif
