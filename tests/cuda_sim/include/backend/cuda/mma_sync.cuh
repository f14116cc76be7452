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

// One mma as a warp collective: every lane hands in its A words, B words
// and accumulator words (in[0..3], in[4..5], in[6..9] of its slot), and
// gets back D's four words: element(in, r, n) computes D (r, n) from the
// gathered slots, for the (row, column) each fragment word holds.
template <typename Element>
void SimMma(int op, const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const uint32_t (&c)[4], uint32_t (&d)[4],
            Element element) {
  uint64_t in[10];
  for (int i = 0; i < 4; ++i) in[i] = a[i];
  in[4] = b0, in[5] = b1;
  for (int i = 0; i < 4; ++i) in[6 + i] = c[i];
  uint64_t out[4];
  simt::Gather* g = simt::CurrentBlock()->warps[simt::MyWarp()].get();
  simt::WarpRendezvous(op, in, 10, out, 4, [g, &element] {
    for (int l = 0; l < simt::kLanes; ++l) {
      const int gr = l / 4, t = l % 4;
      for (int i = 0; i < 4; ++i) g->out[l][i] = element(g->in, gr + (i >= 2 ? 8 : 0), 2 * t + i % 2);
    }
  });
  for (int i = 0; i < 4; ++i) d[i] = static_cast<uint32_t>(out[i]);
}

// The accumulator word of D (r, n) in the gathered slots (both shapes).
inline uint32_t SimAccumulator(const uint64_t (*in)[simt::kSlotWords], int r, int n) {
  return sim_detail::Word(in[(r % 8) * 4 + n / 2], 6 + (r >= 8 ? 2 : 0) + n % 2);
}

inline void MmaBf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  using sim_detail::Half;
  using sim_detail::Word;
  uint32_t cw[4], d[4];
  for (int i = 0; i < 4; ++i) cw[i] = __float_as_uint(c[i]);
  SimMma(10, a, b[0], b[1], cw, d, [](const uint64_t (*in)[simt::kSlotWords], int r, int n) {
    auto A = [&](int k) { return Half(Word(in[(r % 8) * 4 + (k % 8) / 2], (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)), k % 2); };
    auto B = [&](int k) { return Half(Word(in[n * 4 + (k % 8) / 2], 4 + (k >= 8 ? 1 : 0)), k % 2); };
    double sum = __uint_as_float(SimAccumulator(in, r, n));
    for (int k = 0; k < 16; ++k) sum += static_cast<double>(A(k)) * B(k);
    return static_cast<uint64_t>(__float_as_uint(static_cast<float>(sum)));
  });
  for (int i = 0; i < 4; ++i) c[i] = __uint_as_float(d[i]);
}

inline void MmaU8S8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  using sim_detail::Word;
  uint32_t cw[4], d[4];
  for (int i = 0; i < 4; ++i) cw[i] = static_cast<uint32_t>(c[i]);
  SimMma(14, a, b0, b1, cw, d, [](const uint64_t (*in)[simt::kSlotWords], int r, int n) {
    auto byte = [](uint32_t w, int i) { return (w >> (8 * i)) & 0xffu; };
    auto A = [&](int k) {  // u8
      return static_cast<int>(byte(Word(in[(r % 8) * 4 + (k % 16) / 4], (r >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0)), k % 4));
    };
    auto B = [&](int k) {  // s8
      return static_cast<int>(static_cast<int8_t>(byte(Word(in[n * 4 + (k % 16) / 4], 4 + (k >= 16 ? 1 : 0)), k % 4)));
    };
    int64_t sum = static_cast<int32_t>(SimAccumulator(in, r, n));
    for (int k = 0; k < 32; ++k) sum += static_cast<int64_t>(A(k)) * B(k);
    return static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(sum)));
  });
  for (int i = 0; i < 4; ++i) c[i] = static_cast<int>(d[i]);
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

}  // namespace g4::cuda
