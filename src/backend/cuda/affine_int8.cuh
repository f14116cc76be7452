// MatMul over MLX affine weights on the GPU in the CPU backend's integer
// scheme (backend/cpu/affine_int8.h), so that a GPU output is bitwise the
// CPU backend's, whatever the batch, the tile or the kernel:
//
//  1. Each input row is quantized once per call, per weight group g:
//       a = max |x_k| (exact; NaN above infinity), d_g = a / 127,
//       inv = 127 / a (0 when a = 0; a not finite: d_g = NaN, inv = 0),
//       q_k = x86 cvtps(x_k * inv) clamped to [-127, 127] (round half to
//       even; NaN or out of int range: INT_MIN, so -127),
//       xs_g = float(sum of the group's q_k) * d_g.
//  2. y[m, n] = 0; for g = 0, 1, ...: isum = sum over the group of c_k q_k
//     (int32, exact in any order: dp4a here);
//       y = fma(float(isum), s_g * d_g, y);  y = fma(b_g, xs_g, y).
//
// Quantized rows are stored in the order the kernel unpacks codes (QPos):
// 4-bit: per 8 columns the 4 even ones then the 4 odd ones (a code word's
// low nibbles, then its high nibbles); 2-bit: per 16 columns, columns
// s, s + 4, s + 8, s + 12 for s = 0..3 (the word shifted by 2s, masked);
// 3-, 5-, 6- and 8-bit: column order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cuda/weight_access.cuh"

namespace g4::cuda {

// Quantized input rows: row m's codes at q + m * ldq (QPos order), its
// group values at d + m * ldg and xs + m * ldg.
struct QRows {
  int8_t* q = nullptr;
  int64_t ldq = 0;
  float* d = nullptr;
  float* xs = nullptr;
  int64_t ldg = 0;
};

// Bytes of device scratch QRows needs for `rows` rows of k columns in
// groups of `group`, and the view of such a buffer: the codes, then the d
// and xs arrays, each 256-byte aligned.
inline size_t QRowsAlign(size_t n) { return (n + 255) / 256 * 256; }
inline size_t QRowsBytes(int64_t rows, int64_t k, int group) {
  const int64_t groups = k / group;
  return QRowsAlign(static_cast<size_t>(rows * k)) + 2 * QRowsAlign(static_cast<size_t>(rows * groups) * 4);
}
inline QRows QRowsIn(void* scratch, int64_t rows, int64_t k, int group) {
  const int64_t groups = k / group;
  char* base = static_cast<char*>(scratch);
  QRows qr;
  qr.q = reinterpret_cast<int8_t*>(base);
  qr.ldq = k;
  qr.d = reinterpret_cast<float*>(base + QRowsAlign(static_cast<size_t>(rows * k)));
  qr.xs = qr.d + QRowsAlign(static_cast<size_t>(rows * groups) * 4) / 4;
  qr.ldg = groups;
  return qr;
}

// Quantizes `rows` rows of x (k columns) for weights of `bits` bits in
// groups of `group` into qr; with u (gated), rows of gelu_tanh(x) * u
// (GeluMul's bits) instead. Row i reads row src_rows[i] / per_entry when
// src_rows is given (the MoE experts' gather), else row i.
void QuantizeRows(const float* x, int64_t ldx, const float* u, int64_t ldu, const int32_t* src_rows,
                  int32_t per_entry, int64_t rows, int64_t k, int group, int bits, const QRows& qr,
                  cudaStream_t stream);

// Which input rows and weights a block of the affine kernel takes.
struct TileSource {
  // Plain: input rows [blockIdx.y * mt, ...) of M, weights w.
  int64_t M = 0;
  // Expert tiles (moe.cu's plan): tile blockIdx.y covers rows
  // tile_start[t] .. + tile_count[t] with expert tile_expert[t]'s weights
  // (codes, scales, biases at table[3 * e .. 3 * e + 2]); tiles past
  // *num_tiles do nothing.
  const int32_t* num_tiles = nullptr;
  const int32_t* tile_expert = nullptr;
  const int32_t* tile_start = nullptr;
  const int32_t* tile_count = nullptr;
  const void* const* table = nullptr;
};

// One product of a launch: y = x w^T (row m of y at y + m * ldy).
struct AffineOut {
  DevWeight w;
  float* y = nullptr;
  int64_t ldy = 0;
};
constexpr int kMaxAffineOuts = 4;

// outs[i].y = x outs[i].w^T in the scheme above for quantized rows qr,
// every product in one launch (the matrices share bits, group size and
// column count, hence qr); mt (1, 2, 4 or 8) input rows per block, `tiles`
// blocks along y. The result does not depend on mt or on the other
// products of the launch. An expert-tile source takes one product.
void AffineInt8MatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, const TileSource& src, int mt,
                      int64_t tiles, cudaStream_t stream);
// The same products for one quantized input row (qr, row 0) by the
// one-row kernel (affine_int8_row.cu): bitwise AffineInt8MatMul's.
// Launched as a programmatic dependent of the kernel before it.
void AffineInt8RowMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream);
// The same products by the block-shared one-row kernel
// (affine_int8_row_block.cu: a block's 8 warps share 8 weight rows), when
// it takes them: bf16 scales, 16-byte aligned codes, at most 383 groups per
// row; and G4_CUDA_ROW_BLOCK is not 0. Bitwise AffineInt8MatMul's.
bool AffineInt8RowBlockMatMulTakes(std::span<const AffineOut> outs);
void AffineInt8RowBlockMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream);
// The same products for one quantized input row with the group sums on the
// int8 tensor cores (affine_int8_row_mma.cu), when it takes them: 4-bit
// codes, groups of 32, 64 or 128, bf16 scales, 16-byte aligned codes.
// Bitwise AffineInt8MatMul's. AffineInt8RowMatMul hands its products to it
// when G4_CUDA_ROW_MMA is on (kRowMmaByDefault while unset).
constexpr bool kRowMmaByDefault = false;
bool AffineInt8RowMmaMatMulTakes(std::span<const AffineOut> outs, int bits);
void AffineInt8RowMmaMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream);
// The most input rows one launch of the few-row kernel takes.
constexpr int64_t kRowsMmaMaxRowsIn = 32;
// The same products for 2 to kRowsMmaMaxRowsIn quantized input rows (qr's
// rows 0 .. rows_in - 1; a decode batch) by the few-row tensor-core kernel
// (affine_int8_row_mma.cu: one mma takes 16 weight rows x 8 input rows),
// when it takes them: 4-bit codes, groups of 32, 64 or 128, bf16 scales,
// 16-byte aligned codes. Bitwise AffineInt8MatMul's. MatMul hands it
// those products as G4_CUDA_ROWS_MMA says (matmul.cu; kRowsMmaByDefault
// while unset).
constexpr bool kRowsMmaByDefault = true;
bool AffineInt8RowsMmaMatMulTakes(std::span<const AffineOut> outs, int bits, int64_t rows_in);
void AffineInt8RowsMmaMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, int64_t rows_in,
                             cudaStream_t stream);
// A product of the one-row kernel as the kernel reads it: rows [first,
// end) of its launch are rows 0, 1, ... of the matrix at codes, scales,
// biases (row_bytes per row; scale_type kSBF16/kSF16/kSF32; vec16: codes
// and row_bytes 16-byte aligned), times quantized input row in_row of the
// launch's QRows, into y[0 .. end - first).
struct RowProduct {
  const uint8_t* codes;
  const void* scales;
  const void* biases;
  float* y;
  int64_t row_bytes;
  int32_t first, end;
  int16_t scale_type;
  int16_t vec16;
  int32_t in_row;
};  // 56 bytes: a host-described launch's shared memory as before in_row
constexpr int kMaxRowProducts = 32;
// The one-row kernel over n <= kMaxRowProducts products described on the
// device (the MoE experts of a decode step, chosen there): table[0 .. n)
// is written by a kernel earlier in the stream and read after the wait
// for the predecessor; every product has `rows` rows (`units` = n * rows
// in all), every matrix `bits` bits, groups of `group`, `cols` columns and
// scales of `scale_type` (every product's RowProduct::scale_type); vec16:
// every product's codes and row_bytes are 16-byte aligned. Each product's
// rows are bitwise AffineInt8MatMul's for its input row alone. With
// G4_CUDA_ROW_MMA on, AffineInt8RowMmaMatMulTable takes the products it can.
void AffineInt8RowMatMulTable(const RowProduct* table, int n, int64_t units, int bits, int group, int64_t cols,
                              int scale_type, bool vec16, const QRows& qr, cudaStream_t stream);
// The tensor-core one-row kernel over such a table (every product `rows`
// rows): 4-bit, groups of 32, 64 or 128, bf16 scales, vec16.
bool AffineInt8RowMmaMatMulTableTakes(int bits, int group, int64_t cols, int scale_type, bool vec16);
void AffineInt8RowMmaMatMulTable(const RowProduct* table, int n, int32_t rows, int bits, int group, int64_t cols,
                                 int scale_type, bool vec16, const QRows& qr, cudaStream_t stream);
// The same products on the int8 tensor cores (affine_int8_mma.cu), bm (8,
// 32 or 64) input rows per block: bitwise AffineInt8MatMul's. Launched as a
// programmatic dependent of the kernel before it. An expert-tile source
// takes one product, tiles of at most bm rows.
void AffineInt8MmaMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, const TileSource& src, int bm,
                         int64_t tiles, cudaStream_t stream);
// The tensor-core kernel's tile rows for a launch of `rows` input rows, and
// the fewest rows for which MatMul takes it (G4_CUDA_MMA_MIN_ROWS, default 9).
int AffineMmaTileRows(int64_t rows);
// A block of that kernel for a launch of `rows` input rows: the weight
// rows it takes, and how many such blocks an SM holds.
struct AffineMmaBlock {
  int weight_rows;
  int per_sm;
};
AffineMmaBlock AffineMmaBlockFor(int64_t rows);
int AffineMmaMinRows();
inline void AffineInt8MatMul(const DevWeight& w, int bits, const QRows& qr, const TileSource& src, int mt,
                             int64_t tiles, float* y, int64_t ldy, cudaStream_t stream) {
  const AffineOut one{w, y, ldy};
  AffineInt8MatMul(std::span<const AffineOut>(&one, 1), bits, qr, src, mt, tiles, stream);
}

}  // namespace g4::cuda
