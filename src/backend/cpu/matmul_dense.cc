// Matrix-vector products over dense F32/BF16/F16 weights (decode: a few
// input rows). Memory-bound: each thread streams a contiguous range of weight
// rows, NR rows at a time, converting to float in registers; all input rows
// share every weight load.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

// Below this many weight elements a matmul runs on the calling thread: the
// fork/join would cost more than it saves.
constexpr int64_t kParallelMinElems = 1 << 15;

template <DType T>
struct WeightLoad;

template <>
struct WeightLoad<DType::kF32> {
  using Elem = float;
  static VF Full(const float* p) { return VLoad(p); }
  static VF Part(const float* p, int n) { return VLoadN(p, n); }
};

template <>
struct WeightLoad<DType::kBF16> {
  using Elem = uint16_t;
  static VF Full(const uint16_t* p) { return VLoadBf16(p); }
  static VF Part(const uint16_t* p, int n) {
    uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, p, n * sizeof(uint16_t));
    return VLoadBf16(tmp);
  }
};

template <>
struct WeightLoad<DType::kF16> {
  using Elem = uint16_t;
  static VF Full(const uint16_t* p) { return VLoadF16(p); }
  static VF Part(const uint16_t* p, int n) {
    uint16_t tmp[kLanes] = {};
    std::memcpy(tmp, p, n * sizeof(uint16_t));
    return VLoadF16(tmp);
  }
};

// y[m, r] for m < M and the NR weight rows starting at w.
template <DType T, int M, int NR>
void GemvBlock(const float* x, int64_t ldx, int64_t k_len, const typename WeightLoad<T>::Elem* w, float* y,
               int64_t ldy) {
  using L = WeightLoad<T>;
  VF acc[M][NR];
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = VZero();
  int64_t k = 0;
  for (; k + kLanes <= k_len; k += kLanes) {
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = L::Full(w + r * k_len + k);
    for (int m = 0; m < M; ++m) {
      const VF xv = VLoad(x + m * ldx + k);
      for (int r = 0; r < NR; ++r) acc[m][r] = VFma(xv, wv[r], acc[m][r]);
    }
  }
  if (k < k_len) {
    const int n = static_cast<int>(k_len - k);
    VF wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = L::Part(w + r * k_len + k, n);
    for (int m = 0; m < M; ++m) {
      const VF xv = VLoadN(x + m * ldx + k, n);
      for (int r = 0; r < NR; ++r) acc[m][r] = VFma(xv, wv[r], acc[m][r]);
    }
  }
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < NR; ++r) y[m * ldy + r] = VReduceAdd(acc[m][r]);
}

template <DType T, int M>
void GemvRows(const float* x, int64_t ldx, const WeightMatrix& w, float* y, int64_t ldy) {
  // Accumulators M x NR plus NR weight vectors must fit the register file
  // (32 registers with AVX-512, 16 otherwise).
  constexpr int kNr = (kLanes == 16 || M <= 2) ? 4 : 2;
  using Elem = typename WeightLoad<T>::Elem;
  const Elem* data = static_cast<const Elem*>(w.data);
  const int64_t n_rows = w.rows, k_len = w.cols;
  const int64_t blocks = n_rows / kNr;
  ParallelFor(blocks, std::max<int64_t>(1, kParallelMinElems / (kNr * std::max<int64_t>(1, k_len))),
              [&](int64_t b0, int64_t b1) {
                for (int64_t b = b0; b < b1; ++b)
                  GemvBlock<T, M, kNr>(x, ldx, k_len, data + b * kNr * k_len, y + b * kNr, ldy);
              });
  for (int64_t n = blocks * kNr; n < n_rows; ++n)
    GemvBlock<T, M, 1>(x, ldx, k_len, data + n * k_len, y + n, ldy);
}

template <DType T>
void GemvTyped(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  switch (m_rows) {
    case 1:
      return GemvRows<T, 1>(x, ldx, w, y, ldy);
    case 2:
      return GemvRows<T, 2>(x, ldx, w, y, ldy);
    case 3:
      return GemvRows<T, 3>(x, ldx, w, y, ldy);
    case 4:
      return GemvRows<T, 4>(x, ldx, w, y, ldy);
    default:
      G4_CHECK_MSG(false, "[cpu] GemvDense: too many input rows");
  }
}

}  // namespace

void GemvDense(const float* x, int64_t ldx, int64_t m_rows, const WeightMatrix& w, float* y, int64_t ldy) {
  static_assert(kGemvMaxRows == 4);
  switch (w.dtype) {
    case DType::kF32:
      return GemvTyped<DType::kF32>(x, ldx, m_rows, w, y, ldy);
    case DType::kBF16:
      return GemvTyped<DType::kBF16>(x, ldx, m_rows, w, y, ldy);
    case DType::kF16:
      return GemvTyped<DType::kF16>(x, ldx, m_rows, w, y, ldy);
    default:
      G4_CHECK_MSG(false, "[cpu] GemvDense: unsupported weight dtype");
  }
}

G4_CPU_END
