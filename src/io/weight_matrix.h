// WeightMatrix: a non-owning view of one logical weight matrix [rows=out,
// cols=in] as it is stored in a checkpoint mapping. Either dense (F32, BF16 or
// F16, row-major) or MLX affine-quantized (packed codes + per-group scales and
// biases). Kernels read these bytes in place: nothing is dequantized in full.
//
// Affine layout (shared docs gemma4-architecture.md 4.4): groups of
// `group_size` consecutive input columns per row; w[r,c] = scale[r, c/g] *
// q[r,c] + bias[r, c/g]. Codes are packed LSB-first in little-endian u32
// words; for bits in {3,5,6} each row is one bit stream (codes may straddle
// words). Rows are `cols * bits / 32` words long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace g4 {

struct WeightMatrix {
  enum class Format { kDense, kAffine };

  Format format = Format::kDense;
  int64_t rows = 0;
  int64_t cols = 0;

  // kDense: `data` is rows x cols elements of `dtype` (F32, BF16 or F16).
  DType dtype = DType::kF32;
  const void* data = nullptr;

  // kAffine.
  int bits = 0;
  int group_size = 0;
  const uint32_t* codes = nullptr;  // rows x words_per_row()
  DType scale_dtype = DType::kBF16;  // of scales and biases: BF16, F16 or F32
  const void* scales = nullptr;      // rows x groups_per_row()
  const void* biases = nullptr;      // rows x groups_per_row()

  bool is_affine() const { return format == Format::kAffine; }
  int64_t words_per_row() const { return cols * bits / 32; }
  int64_t groups_per_row() const { return group_size ? cols / group_size : 0; }
  // Bytes a full pass over the matrix reads (codes + scales + biases, or data).
  size_t StoredBytes() const;
  // Rows [begin, begin + count) as a matrix of their own (a view).
  WeightMatrix RowSlice(int64_t begin, int64_t count) const;
  // "affine 4-bit g64 [2048, 512]" / "BF16 [2048, 512]"
  std::string Describe() const;
};

// Dequantizes one row into `out[cols]` (float32). The reference semantics
// every kernel is tested against.
void DequantizeRow(const WeightMatrix& w, int64_t row, float* out);

// Reads element (r, c) of the packed code matrix (affine only).
uint32_t AffineCode(const WeightMatrix& w, int64_t row, int64_t col);

}  // namespace g4
