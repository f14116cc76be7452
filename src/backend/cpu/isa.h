// Which instruction set a CPU kernel translation unit is compiled for.
//
// The kernels of backend/cpu are compiled once per variant (CMakeLists.txt:
// object libraries g4_cpu_avx512, g4_cpu_avx2, g4_cpu_baseline) with
// G4_CPU_VARIANT set, and the backend picks one variant at start-up
// (cpu_dispatch.h). The whole build uses the baseline flags (x86-64-v2);
// a variant turns its instructions on only around its own code, with
//
//   G4_CPU_BEGIN   // #pragma GCC push_options + target(...), namespace g4::cpu::<variant> {
//   ...
//   G4_CPU_END     // }, #pragma GCC pop_options
//
// which every kernel file and kernel header wraps its code in, after all its
// #includes of other headers. That keeps two things true:
//  - every function of a variant lives in its own namespace (avx512, avx2,
//    baseline), so the three copies of one inline helper never meet in the
//    linker (no ODR merging of an AVX-512 copy into code that runs on an
//    AVX2 machine);
//  - code from the standard library and the other layers (std::vector,
//    std::sort, core/float16.h, ...) is instantiated with the baseline
//    flags even inside a variant's translation unit, because its
//    definitions come before the pragma. (Compiling a whole file with
//    -mavx512f would instead let the linker pick that file's AVX-512 copy
//    of, say, std::vector<float>::resize for the entire program.)
//
// Clang ignores GCC's target pragmas; under clang the same region is
// `#pragma clang attribute push(__attribute__((target(...))), apply_to =
// function)`, which gives every function declared inside it (helpers,
// lambdas' call operators) the variant's target (G4_CPU_TARGET_PUSH/POP).
//
// GCC does not update __AVX2__ and friends under a target pragma, so the
// kernels test G4_ISA_AVX512 / G4_ISA_AVX2 instead (and G4_CPU_NS names the
// variant's namespace):
//   avx512    AVX-512 F/BW/DQ/VL/CD + VNNI + VBMI (+ AVX2, FMA, F16C, BMI2):
//             Ice Lake, Sapphire Rapids and later Xeons; Zen 4 and later
//   avx2      AVX2 + FMA + F16C + BMI2: Haswell and later, Zen 1 and later
//   baseline  x86-64-v2 (SSE4.2): whatever GCC auto-vectorizes
// A file compiled outside the variant libraries (G4_CPU_VARIANT unset; e.g.
// the reference sampler, which borrows simd.h) gets namespace g4::cpu::host
// (inline) and the instructions its own compile flags allow.
#pragma once

#if defined(G4_CPU_VARIANT)

#define G4_CPU_STRINGIFY(x) #x
#define G4_CPU_PRAGMA(x) _Pragma(G4_CPU_STRINGIFY(x))
#if defined(__clang__)
#define G4_CPU_TARGET_PUSH G4_CPU_PRAGMA(clang attribute push(__attribute__((target(G4_CPU_TARGETS))), apply_to = function))
#define G4_CPU_TARGET_POP _Pragma("clang attribute pop")
#else
#define G4_CPU_TARGET_PUSH _Pragma("GCC push_options") G4_CPU_PRAGMA(GCC target(G4_CPU_TARGETS))
#define G4_CPU_TARGET_POP _Pragma("GCC pop_options")
#endif

#if G4_CPU_VARIANT == 3
#define G4_CPU_NS avx512
#define G4_ISA_AVX512 1
#define G4_ISA_AVX2 1
#define G4_CPU_TARGETS "avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx512vnni,avx512vbmi,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt"
#define G4_CPU_BEGIN G4_CPU_TARGET_PUSH namespace g4::cpu::avx512 {
#define G4_CPU_END } G4_CPU_TARGET_POP
#elif G4_CPU_VARIANT == 2
#define G4_CPU_NS avx2
#define G4_ISA_AVX512 0
#define G4_ISA_AVX2 1
#define G4_CPU_TARGETS "avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt"
#define G4_CPU_BEGIN G4_CPU_TARGET_PUSH namespace g4::cpu::avx2 {
#define G4_CPU_END } G4_CPU_TARGET_POP
#elif G4_CPU_VARIANT == 1
#define G4_CPU_NS baseline
#define G4_ISA_AVX512 0
#define G4_ISA_AVX2 0
#define G4_CPU_BEGIN namespace g4::cpu::baseline {
#define G4_CPU_END }
#else
#error "G4_CPU_VARIANT must be 1 (baseline), 2 (avx2) or 3 (avx512)"
#endif

#else  // host: the translation unit's own flags

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__AVX512VBMI__) && defined(__FMA__) && defined(__F16C__)
#define G4_ISA_AVX512 1
#else
#define G4_ISA_AVX512 0
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define G4_ISA_AVX2 1
#else
#define G4_ISA_AVX2 0
#endif
#define G4_CPU_NS host
#define G4_CPU_BEGIN namespace g4::cpu { inline namespace host {
#define G4_CPU_END \
  }                \
  }

#endif
