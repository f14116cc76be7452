// Shadow of backend/cuda/mma_sync.cuh for the SIMT emulator: mma.sync
// m16n8k16 (bf16 in, f32 accumulators), m16n8k32 (u8 x s8, int32) and
// ldmatrix.x4 as warp collectives over the PTX manual's fragment layouts,
// and the block's dynamic shared memory. A bf16 mma's element is its
// accumulator plus the sum of its 16 exact products, rounded once to f32 (a
// model: the hardware's rounding differs, never its independence of other
// rows and columns); an int8 mma's is exact, as the hardware's. Test-only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace g4::cuda {

namespace sim_detail {
inline float Half(uint32_t word, int high) {
  return __uint_as_float((high ? word >> 16 : word & 0xffffu) << 16);
}
inline uint32_t Word(const uint64_t* slot, int i) { return static_cast<uint32_t>(slot[i]); }
}  // namespace sim_detail

inline void MmaBf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  using sim_detail::Half;
  using sim_detail::Word;
  uint64_t in[10];
  for (int i = 0; i < 4; ++i) in[i] = a[i];
  for (int i = 0; i < 2; ++i) in[4 + i] = b[i];
  for (int i = 0; i < 4; ++i) in[6 + i] = __float_as_uint(c[i]);
  uint64_t out[4];
  simt::Gather* g = simt::CurrentBlock()->warps[simt::MyWarp()].get();
  simt::WarpRendezvous(10, in, 10, out, 4, [g] {
    auto A = [&](int r, int k) {
      const uint64_t* s = g->in[(r % 8) * 4 + (k % 8) / 2];
      return Half(Word(s, (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)), k % 2);
    };
    auto B = [&](int k, int n) { return Half(Word(g->in[n * 4 + (k % 8) / 2], 4 + (k >= 8 ? 1 : 0)), k % 2); };
    auto C = [&](int r, int n) {
      return __uint_as_float(Word(g->in[(r % 8) * 4 + n / 2], 6 + (r >= 8 ? 2 : 0) + n % 2));
    };
    for (int l = 0; l < simt::kLanes; ++l) {
      const int gr = l / 4, t = l % 4;
      for (int i = 0; i < 4; ++i) {
        const int r = gr + (i >= 2 ? 8 : 0), n = 2 * t + i % 2;
        double sum = C(r, n);
        for (int k = 0; k < 16; ++k) sum += static_cast<double>(A(r, k)) * B(k, n);
        g->out[l][i] = __float_as_uint(static_cast<float>(sum));
      }
    }
  });
  for (int i = 0; i < 4; ++i) c[i] = __uint_as_float(static_cast<uint32_t>(out[i]));
}

inline void MmaU8S8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  using sim_detail::Word;
  uint64_t in[10];
  for (int i = 0; i < 4; ++i) in[i] = a[i];
  in[4] = b0, in[5] = b1;
  for (int i = 0; i < 4; ++i) in[6 + i] = static_cast<uint32_t>(c[i]);
  uint64_t out[4];
  simt::Gather* g = simt::CurrentBlock()->warps[simt::MyWarp()].get();
  simt::WarpRendezvous(14, in, 10, out, 4, [g] {
    auto byte = [](uint32_t w, int i) { return (w >> (8 * i)) & 0xffu; };
    auto A = [&](int r, int k) {  // u8
      const uint64_t* s = g->in[(r % 8) * 4 + (k % 16) / 4];
      return static_cast<int>(byte(Word(s, (r >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0)), k % 4));
    };
    auto B = [&](int k, int n) {  // s8
      return static_cast<int>(static_cast<int8_t>(byte(Word(g->in[n * 4 + (k % 16) / 4], 4 + (k >= 16 ? 1 : 0)), k % 4)));
    };
    auto C = [&](int r, int n) {
      return static_cast<int32_t>(Word(g->in[(r % 8) * 4 + n / 2], 6 + (r >= 8 ? 2 : 0) + n % 2));
    };
    for (int l = 0; l < simt::kLanes; ++l) {
      const int gr = l / 4, t = l % 4;
      for (int i = 0; i < 4; ++i) {
        const int r = gr + (i >= 2 ? 8 : 0), n = 2 * t + i % 2;
        int64_t sum = C(r, n);
        for (int k = 0; k < 32; ++k) sum += static_cast<int64_t>(A(r, k)) * B(k, n);
        g->out[l][i] = static_cast<uint32_t>(static_cast<int32_t>(sum));
      }
    }
  });
  for (int i = 0; i < 4; ++i) c[i] = static_cast<int>(static_cast<uint32_t>(out[i]));
}

inline void SimLdMatrix(uint32_t (&r)[4], const void* row, bool trans) {
  uint64_t in = reinterpret_cast<uintptr_t>(row), out[4];
  simt::Gather* g = simt::CurrentBlock()->warps[simt::MyWarp()].get();
  simt::WarpRendezvous(trans ? 12 : 11, &in, 1, out, 4, [g, trans] {
    auto elem = [&](int m, int rr, int cc) {  // matrix m, row rr, column cc (b16)
      uint16_t v;
      std::memcpy(&v, reinterpret_cast<const uint8_t*>(g->in[8 * m + rr][0]) + 2 * cc, 2);
      return static_cast<uint32_t>(v);
    };
    for (int l = 0; l < simt::kLanes; ++l)
      for (int m = 0; m < 4; ++m) {
        const uint32_t lo = trans ? elem(m, 2 * (l % 4), l / 4) : elem(m, l / 4, 2 * (l % 4));
        const uint32_t hi = trans ? elem(m, 2 * (l % 4) + 1, l / 4) : elem(m, l / 4, 2 * (l % 4) + 1);
        g->out[l][m] = lo | (hi << 16);
      }
  });
  for (int i = 0; i < 4; ++i) r[i] = static_cast<uint32_t>(out[i]);
}
inline void LdMatrixX4(uint32_t (&r)[4], const void* row) { SimLdMatrix(r, row, false); }
inline void LdMatrixX4Trans(uint32_t (&r)[4], const void* row) { SimLdMatrix(r, row, true); }

inline uint8_t* DynamicShared() { return simt::CurrentBlock()->dynamic_smem.data(); }

}  // namespace g4::cuda
