// Vectorized exp and tanh for softmax, GELU and softcapping. libm has no
// vector entry points GCC will use without -ffast-math, and a scalar call per
// element would dominate those ops. Both follow Cephes' single-precision
// algorithms: about 1-2 ulp relative error over the whole float range.
#pragma once

#include "backend/cpu/simd.h"

G4_CPU_BEGIN

// e^x. Inputs below about -87.3 give a tiny positive value (not 0), inputs
// above 88.7 give +inf on AVX-512 and a large finite value elsewhere; NaN in
// gives NaN out.
inline VF VExp(VF x) {
  // Constant first: min/max return the second operand for NaN, keeping it.
  x = VMin(VSet1(88.7228f), x);
  x = VMax(VSet1(-87.3365f), x);
  const VF n = VRound(VMul(x, VSet1(1.44269504088896341f)));
  // r = x - n * ln2, with ln2 split so n * kLn2Hi is exact.
  VF r = VFma(n, VSet1(-0.693359375f), x);
  r = VFma(n, VSet1(2.12194440e-4f), r);
  VF p = VSet1(1.9875691500e-4f);
  p = VFma(p, r, VSet1(1.3981999507e-3f));
  p = VFma(p, r, VSet1(8.3334519073e-3f));
  p = VFma(p, r, VSet1(4.1665795894e-2f));
  p = VFma(p, r, VSet1(1.6666665459e-1f));
  p = VFma(p, r, VSet1(5.0000001201e-1f));
  p = VFma(p, VMul(r, r), VAdd(r, VSet1(1.0f)));
  return VScale2(p, n);
}

// tanh(x): an odd polynomial near zero (where 1 - 2/(e^2x + 1) would cancel)
// and the exp form elsewhere.
inline VF VTanh(VF x) {
  const VF ax = VAbs(x);
  const VF z = VMul(x, x);
  VF p = VSet1(-5.70498872745e-3f);
  p = VFma(p, z, VSet1(2.06390887954e-2f));
  p = VFma(p, z, VSet1(-5.37397155531e-2f));
  p = VFma(p, z, VSet1(1.33314422036e-1f));
  p = VFma(p, z, VSet1(-3.33332819422e-1f));
  const VF small = VFma(VMul(p, z), x, x);
  // |x| >= 9 is 1 to float precision; clamping keeps exp finite.
  const VF ac = VMin(VSet1(9.0f), ax);
  const VF e = VExp(VAdd(ac, ac));
  const VF big = VSub(VSet1(1.0f), VDiv(VSet1(2.0f), VAdd(e, VSet1(1.0f))));
  return VSelectLt(ax, VSet1(0.625f), small, VCopySign(big, x));
}

G4_CPU_END
