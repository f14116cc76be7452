// RMSNorm as HF Gemma 4 computes it in float32:
//   y = (x * pow(mean(x^2) + eps, -0.5)) * weight.
// The row's sum of squares is read completely before any y is written, so y
// may alias x.
#include <cmath>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

G4_CPU_BEGIN

void RmsNorm(const float* x, int64_t ldx, int64_t rows, int64_t d, const float* weight, float eps, float* y,
             int64_t ldy) {
  ParallelFor(rows, MinRowsPerPiece(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * ldx;
      float* yr = y + r * ldy;
      const float ms = VDot(xr, xr, d) / static_cast<float>(d) + eps;
      const VF inv = VSet1(std::pow(ms, -0.5f));
      int64_t i = 0;
      for (; i + kLanes <= d; i += kLanes) {
        VF v = VMul(VLoad(xr + i), inv);
        if (weight) v = VMul(v, VLoad(weight + i));
        VStore(yr + i, v);
      }
      if (i < d) {
        const int n = static_cast<int>(d - i);
        VF v = VMul(VLoadN(xr + i, n), inv);
        if (weight) v = VMul(v, VLoadN(weight + i, n));
        VStoreN(yr + i, v, n);
      }
    }
  });
}

G4_CPU_END
