// Embedding lookup: dequantizes only the selected rows, then scales.
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

G4_CPU_BEGIN

void Embed(const WeightMatrix& table, const int32_t* ids, int64_t n, float scale, float* out, int64_t ldo) {
  const int64_t d = table.cols;
  const VF vs = VSet1(scale);
  ParallelFor(n, MinRowsPerPiece(d), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* o = out + i * ldo;
      DecodeRowRange(table, ids[i], 0, d, o);
      int64_t c = 0;
      for (; c + kLanes <= d; c += kLanes) VStore(o + c, VMul(VLoad(o + c), vs));
      if (c < d) VStoreN(o + c, VMul(VLoadN(o + c, static_cast<int>(d - c)), vs), static_cast<int>(d - c));
    }
  });
}

G4_CPU_END
