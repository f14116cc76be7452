// Streaming elementwise ops: GELU-gated product, add, scale, softcap.
// Aliasing of outputs with inputs is allowed: each element is read before
// its own slot is written, and no other slot is touched.
#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace g4::cpu {
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

}  // namespace

void GeluMul(const float* g, const float* u, int64_t n, float* out) {
  ParallelRange(n, [&](int64_t begin, int64_t end) {
    ForEachVector(begin, end, [&](int64_t i, int len) {
      Store(out + i, VMul(GeluTanh(Load(g + i, len)), Load(u + i, len)), len);
    });
  });
}

void Add(const float* a, const float* b, int64_t n, float* y) {
  ParallelRange(n, [&](int64_t begin, int64_t end) {
    ForEachVector(begin, end, [&](int64_t i, int len) {
      Store(y + i, VAdd(Load(a + i, len), Load(b + i, len)), len);
    });
  });
}

void Scale(float* x, int64_t n, float s) {
  const VF vs = VSet1(s);
  ParallelRange(n, [&](int64_t begin, int64_t end) {
    ForEachVector(begin, end, [&](int64_t i, int len) { Store(x + i, VMul(Load(x + i, len), vs), len); });
  });
}

void Softcap(float* x, int64_t n, float cap) {
  const VF vc = VSet1(cap);
  ParallelRange(n, [&](int64_t begin, int64_t end) {
    ForEachVector(begin, end, [&](int64_t i, int len) {
      Store(x + i, VMul(vc, VTanh(VDiv(Load(x + i, len), vc))), len);
    });
  });
}

}  // namespace g4::cpu
