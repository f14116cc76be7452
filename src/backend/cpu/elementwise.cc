// Streaming elementwise ops over 2-D views: GELU-gated product, add, scale,
// column scale, softcap. Each element's result depends only on the
// element(s) at the same (row, column), so any split over rows or threads
// gives the same bits. Aliasing of an output with an input of the same
// layout is allowed: each element is read before its own slot is written,
// and no other slot is touched.
#include "backend/cpu/isa.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

G4_CPU_BEGIN
namespace {

// Applies fn to full vectors and to the tail, over [begin, end).
template <typename Fn>
void ForEachVector(int64_t begin, int64_t end, Fn&& fn) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) fn(i, kLanes);
  if (i < end) fn(i, static_cast<int>(end - i));
}

inline VF Load(const float* p, int n) { return n == kLanes ? VLoad(p) : VLoadN(p, n); }
inline void Store(float* p, VF v, int n) {
  if (n == kLanes) {
    VStore(p, v);
  } else {
    VStoreN(p, v, n);
  }
}

// gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline VF GeluTanh(VF x) {
  const VF inner = VMul(VSet1(0.7978845608028654f), VFma(VMul(VSet1(0.044715f), VMul(x, x)), x, x));
  return VMul(VMul(VSet1(0.5f), x), VAdd(VSet1(1.0f), VTanh(inner)));
}

void CheckSameShape(const TensorView& a, const TensorView& b) {
  G4_CHECK_MSG(a.rows == b.rows && a.cols == b.cols, "[cpu] elementwise: operand shapes differ");
  G4_CHECK_MSG(a.dtype == DType::kF32 && b.dtype == DType::kF32, "[cpu] elementwise: operands must be F32");
}

// Calls fn(row, begin, end) over column ranges covering every element of
// [rows, cols]. Contiguous operands are one flat range (split over threads
// in lane-aligned pieces, row = 0, columns = flat indices); strided ones go
// row by row, rows split over threads.
template <typename Fn>
void ForEachRange(bool all_contiguous, int64_t rows, int64_t cols, Fn&& fn) {
  if (rows == 0 || cols == 0) return;
  if (all_contiguous) {
    ParallelRange(rows * cols, [&](int64_t begin, int64_t end) { fn(int64_t{0}, begin, end); });
    return;
  }
  ParallelFor(rows, MinRowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r, int64_t{0}, cols);
  });
}

}  // namespace

void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out) {
  CheckSameShape(g, u);
  CheckSameShape(g, out);
  ForEachRange(g.contiguous() && u.contiguous() && out.contiguous(), g.rows, g.cols,
               [&](int64_t r, int64_t begin, int64_t end) {
                 const float* gr = g.f32() + r * g.stride;
                 const float* ur = u.f32() + r * u.stride;
                 float* o = out.f32() + r * out.stride;
                 ForEachVector(begin, end, [&](int64_t i, int len) {
                   Store(o + i, VMul(GeluTanh(Load(gr + i, len)), Load(ur + i, len)), len);
                 });
               });
}

void Add(const TensorView& a, const TensorView& b, const TensorView& y) {
  CheckSameShape(a, b);
  CheckSameShape(a, y);
  ForEachRange(a.contiguous() && b.contiguous() && y.contiguous(), a.rows, a.cols,
               [&](int64_t r, int64_t begin, int64_t end) {
                 const float* ar = a.f32() + r * a.stride;
                 const float* br = b.f32() + r * b.stride;
                 float* o = y.f32() + r * y.stride;
                 ForEachVector(begin, end, [&](int64_t i, int len) {
                   Store(o + i, VAdd(Load(ar + i, len), Load(br + i, len)), len);
                 });
               });
}

void Scale(const TensorView& x, float s) {
  CheckSameShape(x, x);
  const VF vs = VSet1(s);
  ForEachRange(x.contiguous(), x.rows, x.cols, [&](int64_t r, int64_t begin, int64_t end) {
    float* xr = x.f32() + r * x.stride;
    ForEachVector(begin, end, [&](int64_t i, int len) { Store(xr + i, VMul(Load(xr + i, len), vs), len); });
  });
}

void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y) {
  CheckSameShape(x, y);
  const VF vs = VSet1(s);
  // Row by row even when contiguous: the column vector restarts every row.
  const int64_t rows = x.rows, cols = x.cols;
  if (rows == 0 || cols == 0) return;
  ParallelFor(rows, MinRowsPerPiece(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x.f32() + r * x.stride;
      float* yr = y.f32() + r * y.stride;
      // (x * col) * s: two roundings, in this order.
      ForEachVector(0, cols, [&](int64_t i, int len) {
        Store(yr + i, VMul(VMul(Load(xr + i, len), Load(col + i, len)), vs), len);
      });
    }
  });
}

void Softcap(const TensorView& x, float cap) {
  CheckSameShape(x, x);
  const VF vc = VSet1(cap);
  ForEachRange(x.contiguous(), x.rows, x.cols, [&](int64_t r, int64_t begin, int64_t end) {
    float* xr = x.f32() + r * x.stride;
    ForEachVector(begin, end, [&](int64_t i, int len) {
      Store(xr + i, VMul(vc, VTanh(VDiv(Load(xr + i, len), vc))), len);
    });
  });
}

G4_CPU_END
