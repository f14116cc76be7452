#include "io/weight_matrix.h"

#include <cstring>

#include "core/check.h"
#include "core/float16.h"

namespace g4 {
namespace {
// Tensors in a safetensors file are packed back to back, so their data need
// not be aligned to the element size: every load goes through memcpy.
template <typename T>
T LoadUnaligned(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

float LoadScalar(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kF32: return LoadUnaligned<float>(base, i);
    case DType::kBF16: return Bf16ToF32(LoadUnaligned<uint16_t>(base, i));
    case DType::kF16: return F16ToF32(LoadUnaligned<uint16_t>(base, i));
    default: G4_CHECK_MSG(false, "unsupported scalar dtype");
  }
  return 0;
}
}  // namespace

size_t WeightMatrix::StoredBytes() const {
  if (!is_affine()) return static_cast<size_t>(rows * cols) * DTypeSize(dtype);
  return static_cast<size_t>(rows) * (words_per_row() * 4 + 2 * groups_per_row() * DTypeSize(scale_dtype));
}

WeightMatrix WeightMatrix::RowSlice(int64_t begin, int64_t count) const {
  G4_CHECK(begin >= 0 && count >= 0 && begin + count <= rows);
  WeightMatrix m = *this;
  m.rows = count;
  if (!is_affine()) {
    m.data = static_cast<const uint8_t*>(data) + begin * cols * DTypeSize(dtype);
  } else {
    m.codes = codes + begin * words_per_row();
    const size_t sb = DTypeSize(scale_dtype) * groups_per_row();
    m.scales = static_cast<const uint8_t*>(scales) + begin * sb;
    m.biases = static_cast<const uint8_t*>(biases) + begin * sb;
  }
  return m;
}

std::string WeightMatrix::Describe() const {
  std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  if (is_affine())
    return "affine " + std::to_string(bits) + "-bit g" + std::to_string(group_size) + " " + shape;
  return std::string(DTypeName(dtype)) + " " + shape;
}

uint32_t AffineCode(const WeightMatrix& w, int64_t row, int64_t col) {
  const uint32_t* r = w.codes + row * w.words_per_row();
  const int64_t bit = col * w.bits;
  const int64_t word = bit / 32;
  const int shift = static_cast<int>(bit % 32);
  uint64_t v = LoadUnaligned<uint32_t>(r, word) >> shift;
  if (shift + w.bits > 32) v |= static_cast<uint64_t>(LoadUnaligned<uint32_t>(r, word + 1)) << (32 - shift);
  return static_cast<uint32_t>(v) & ((1u << w.bits) - 1);
}

void DequantizeRow(const WeightMatrix& w, int64_t row, float* out) {
  if (!w.is_affine()) {
    for (int64_t c = 0; c < w.cols; ++c) out[c] = LoadScalar(w.dtype, w.data, row * w.cols + c);
    return;
  }
  const int64_t g = w.groups_per_row();
  for (int64_t c = 0; c < w.cols; ++c) {
    const int64_t gi = row * g + c / w.group_size;
    const float s = LoadScalar(w.scale_dtype, w.scales, gi);
    const float b = LoadScalar(w.scale_dtype, w.biases, gi);
    out[c] = s * static_cast<float>(AffineCode(w, row, c)) + b;
  }
}

}  // namespace g4
