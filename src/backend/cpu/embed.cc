// Embedding lookup: dequantizes only the selected rows, then scales.
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

namespace g4::cpu {

void Embed(const WeightMatrix& table, const int32_t* ids, int64_t n, float scale, float* out, int64_t ldo) {
  const int64_t d = table.cols;
  const VF vs = VSet1(scale);
#pragma omp parallel for schedule(static) if (n > 1 && n * d >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    float* o = out + i * ldo;
    DecodeRowRange(table, ids[i], 0, d, o);
    int64_t c = 0;
    for (; c + kLanes <= d; c += kLanes) VStore(o + c, VMul(VLoad(o + c), vs));
    if (c < d) VStoreN(o + c, VMul(VLoadN(o + c, static_cast<int>(d - c)), vs), static_cast<int>(d - c));
  }
}

}  // namespace g4::cpu
