// Warp-level tensor-core pieces (sm_80+ mma.sync: bf16 m16n8k16 and u8 x s8
// m16n8k32; ldmatrix) and the block's dynamic shared memory; the emulator of tests/cuda_sim shadows this
// header. Fragment layouts are the PTX
// manual's for m16n8k16 (row.col): with g = lane / 4 and t = lane % 4,
//  - A (16 x 16, row major), a[0..3]: (g, 2t..2t+1), (g + 8, 2t..2t+1),
//    (g, 2t + 8..2t + 9), (g + 8, 2t + 8..2t + 9), the lower column in the
//    low half of each 32-bit word;
//  - B (16 x 8, k x n), b[0..1]: (k 2t..2t+1, n g), (k 2t + 8..2t + 9, n g);
//  - C/D (16 x 8 floats), c[0..3]: (g, 2t), (g, 2t + 1), (g + 8, 2t),
//    (g + 8, 2t + 1).
// For m16n8k32 (u8 x s8, row.col), four 8-bit elements per 32-bit word,
// the lowest column in the low byte:
//  - A (16 x 32), a[0..3]: (g, 4t..4t+3), (g + 8, 4t..4t+3),
//    (g, 4t + 16..4t + 19), (g + 8, 4t + 16..4t + 19);
//  - B (32 x 8), b0, b1: (k 4t..4t+3, n g), (k 4t + 16..4t + 19, n g);
//  - C/D (16 x 8 int32): as m16n8k16's.
// An output element of an mma depends only on its own row of A, its column
// of B and its accumulator: which warp computes it, and what the other
// rows and columns hold, cannot change its bits. Internal to backend/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace g4::cuda {

// d = a * b + c, bf16 inputs, f32 accumulators (in place).
__device__ __forceinline__ void MmaBf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c += a (16 x 32 u8) times b (32 x 8 s8): exact int32 sums, so the order
// of the k positions cannot change a bit.
__device__ __forceinline__ void MmaU8S8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 x 8 b16 matrices; lanes 8m .. 8m + 7 give the 16-byte rows of
// matrix m (addresses in shared memory, 16-byte aligned). Lane l receives
// in r[m] row l / 4, elements 2 (l % 4) .. + 1 of matrix m (non-trans), or
// with Trans elements (row 2 (l % 4), column l / 4) and (row 2 (l % 4) + 1,
// column l / 4).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

}  // namespace g4::cuda
