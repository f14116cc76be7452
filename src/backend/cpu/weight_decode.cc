// Row-range dequantization to float32: the weight side of the blocked GEMM
// and of embedding lookups. Same values as io DequantizeRow (s * q + b per
// element), vectorized.
#include <cstring>

#include "backend/cpu/affine_codes.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/kernels.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

template <typename Load>
void ConvertHalf(const uint16_t* src, int64_t n, float* out, Load load) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) VStore(out + i, load(src + i));
  if (i < n) {
    uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, src + i, (n - i) * sizeof(uint16_t));
    VStoreN(out + i, load(tmp), static_cast<int>(n - i));
  }
}

inline float LoadScalar(DType t, const void* base, int64_t i) {
  if (t == DType::kBF16) return Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
  if (t == DType::kF16) return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

template <int B>
void DecodeAffine(const WeightMatrix& w, int64_t row, int64_t col, int64_t count, float* out) {
  const int64_t gs = w.group_size;
  const int64_t first = row * w.groups_per_row() + col / gs;
  const uint32_t* words = w.codes + row * w.words_per_row() + col / kChunk * B;
  for (int64_t g = 0; g < count / gs; ++g) {
    const VF vs = VSet1(LoadScalar(w.scale_dtype, w.scales, first + g));
    const VF vb = VSet1(LoadScalar(w.scale_dtype, w.biases, first + g));
    for (int64_t c = 0; c < gs; c += kChunk) {
      VF q[kChunkVecs];
      LoadChunkNatural<B>(words, q);
      for (int v = 0; v < kChunkVecs; ++v) VStore(out + v * kLanes, VFma(q[v], vs, vb));
      words += B;
      out += kChunk;
    }
  }
}

}  // namespace

void ConvertToFloat(DType t, const void* base, int64_t first, int64_t n, float* out) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, static_cast<const float*>(base) + first, n * sizeof(float));
      return;
    case DType::kBF16:
      ConvertHalf(static_cast<const uint16_t*>(base) + first, n, out, VLoadBf16);
      return;
    case DType::kF16:
      ConvertHalf(static_cast<const uint16_t*>(base) + first, n, out, VLoadF16);
      return;
    default:
      G4_CHECK_MSG(false, "[cpu] unsupported scale dtype");
  }
}

void DecodeRowRange(const WeightMatrix& w, int64_t row, int64_t col, int64_t count, float* out) {
  if (!w.is_affine()) {
    ConvertToFloat(w.dtype, w.data, row * w.cols + col, count, out);
    return;
  }
  G4_DCHECK(col % w.group_size == 0 && count % w.group_size == 0);
  switch (w.bits) {
    case 2:
      return DecodeAffine<2>(w, row, col, count, out);
    case 3:
      return DecodeAffine<3>(w, row, col, count, out);
    case 4:
      return DecodeAffine<4>(w, row, col, count, out);
    case 5:
      return DecodeAffine<5>(w, row, col, count, out);
    case 6:
      return DecodeAffine<6>(w, row, col, count, out);
    case 8:
      return DecodeAffine<8>(w, row, col, count, out);
    default:
      G4_CHECK_MSG(false, "[cpu] unsupported affine bit width");
  }
}

G4_CPU_END
