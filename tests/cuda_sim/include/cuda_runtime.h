// Shadow of the CUDA runtime header for the SIMT emulator (simt.h): the
// qualifiers, built-in types and intrinsics the kernels under test use,
// compiled as C++ on the host. Test-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "simt.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
#define __align__(n) alignas(n)
#define __launch_bounds__(...)

struct int2 { int x, y; };
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

using cudaStream_t = struct SimStream*;
enum cudaError_t { cudaSuccess = 0 };
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9
};
enum cudaSharedCarveout { cudaSharedmemCarveoutMaxShared = 100 };
inline const char* cudaGetErrorString(cudaError_t) { return "simulated"; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaSuccess"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
template <typename F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
// One emulated device with an H100's multiprocessor count (launch shapes
// size themselves by it); launches run to completion, so a stream is
// always synchronized.
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { *v = 132; return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t __float_as_uint(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }  // the host's SSE multiply rounds to nearest even
inline float __int2float_rn(int v) { return static_cast<float>(v); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int __float2int_rn(float v) { return static_cast<int>(std::nearbyint(v)); }  // the default rounding: to nearest even
// The low word of hi:lo shifted right by shift & 31 (CUDA's wrap mode).
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t shift) {
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (shift & 31));
}
template <typename T> T __ldg(const T* p) { return *p; }
template <typename T> T __ldcg(const T* p) { return *p; }
// Blocks run one after another and a block's threads never preempt each
// other, so a read-modify-write is atomic and fences have nothing to order.
inline int atomicAdd(int* p, int v) { const int old = *p; *p = old + v; return old; }
inline void __threadfence() {}
[[noreturn]] inline void __trap() { simt::Fail("__trap() in a kernel"); }
inline void __syncthreads() { simt::BlockBarrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) {}

// CUDA's integer min / max overloads, found unqualified in device code.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }

// Warp collectives; every lane of the warp must take part (full masks only).
template <typename T>
T SimShuffle(int op, T v, int arg) {
  static_assert(sizeof(T) <= 8);
  uint64_t in[2] = {0, static_cast<uint64_t>(static_cast<int64_t>(arg))};
  std::memcpy(in, &v, sizeof(T));
  uint64_t out = 0;
  simt::Gather* g = simt::CurrentBlock()->warps[simt::MyWarp()].get();
  simt::WarpRendezvous(op, in, 2, &out, 1, [g, op] {
    for (int l = 0; l < simt::kLanes; ++l) {
      const int a = static_cast<int>(g->in[l][1]);
      const int src = op == 1 ? (a & 31) : op == 13 ? (l - a >= 0 ? l - a : l) : (l ^ a) & 31;
      g->out[l][0] = g->in[src][0];
    }
  });
  T r;
  std::memcpy(&r, &out, sizeof(T));
  return r;
}
template <typename T> T __shfl_sync(unsigned, T v, int src) { return SimShuffle(1, v, src); }
template <typename T> T __shfl_xor_sync(unsigned, T v, int mask) { return SimShuffle(2, v, mask); }
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned delta) { return SimShuffle(13, v, static_cast<int>(delta)); }
inline unsigned SimReduce(int op, unsigned v) {
  uint64_t in = v, out = 0;
  simt::Gather* g = simt::CurrentBlock()->warps[simt::MyWarp()].get();
  simt::WarpRendezvous(op, &in, 1, &out, 1, [g, op] {
    uint64_t r = g->in[0][0];
    for (int l = 1; l < simt::kLanes; ++l)
      r = op == 3 ? std::min(r, g->in[l][0]) : op == 15 ? static_cast<uint32_t>(r + g->in[l][0]) : std::max(r, g->in[l][0]);
    for (int l = 0; l < simt::kLanes; ++l) g->out[l][0] = r;
  });
  return static_cast<unsigned>(out);
}
inline unsigned __reduce_min_sync(unsigned, unsigned v) { return SimReduce(3, v); }
inline unsigned __reduce_max_sync(unsigned, unsigned v) { return SimReduce(4, v); }
inline int __reduce_add_sync(unsigned, int v) { return static_cast<int>(SimReduce(15, static_cast<unsigned>(v))); }
