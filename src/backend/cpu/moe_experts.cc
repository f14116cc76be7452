// Ops::MoeExperts on the host. The CPU is the device here, so the grouping
// of rows by expert is plain host code over the routed ids:
//  1. the step's (row, j) pairs are ordered by (expert, pair index) and
//     each pair's input row gathered into that order, so every expert's rows
//     are contiguous (ascending row within an expert);
//  2. per expert in ascending id, over its rows in chunks of at most T
//     (more only if a row lists an expert twice): gate and up MatMuls, the
//     GELU product, the down MatMul written over the gathered inputs (no
//     longer needed), so in_out ends up holding each pair's expert output;
//  3. per row: out = 0, then out = fma(weight, expert output, out) over its
//     k experts in ascending expert id (ties: ascending j).
// Step 2's MatMuls are row-invariant and steps 1 and 3 never mix rows, so a
// row's output is bitwise the same whatever else is in the step.
//
// Workspace layout: backend/ops.cc (MoeWorkspaceBytes).
#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

constexpr size_t kAlign = 64;
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Largest top_k a row may route to (a fixed bound keeps step 3
// allocation-free).
constexpr int kMaxTopK = 64;

}  // namespace

void MoeExperts(const MoeExpertsArgs& a) {
  const int64_t rows = a.x.rows, hidden = a.x.cols;
  const int64_t num_experts = static_cast<int64_t>(a.gate.size());
  G4_CHECK_MSG(a.x.dtype == DType::kF32 && a.out.dtype == DType::kF32,
               "[cpu] MoeExperts: x and out must be F32");
  G4_CHECK_MSG(a.out.rows == rows && a.out.cols == hidden, "[cpu] MoeExperts: out shape differs from x");
  G4_CHECK_MSG(a.ids.dtype == DType::kI32 && a.weights.dtype == DType::kF32,
               "[cpu] MoeExperts: ids I32, weights F32");
  G4_CHECK_MSG(a.ids.rows == rows && a.weights.rows == rows && a.weights.cols == a.ids.cols,
               "[cpu] MoeExperts: ids / weights shape");
  G4_CHECK_MSG(a.up.size() == a.gate.size() && a.down.size() == a.gate.size() && num_experts > 0,
               "[cpu] MoeExperts: gate, up and down must list the same experts");
  const int top_k = static_cast<int>(a.ids.cols);
  G4_CHECK_MSG(top_k >= 1 && top_k <= kMaxTopK, "[cpu] MoeExperts: top_k out of range");
  if (rows == 0) return;
  const int64_t width = a.gate[0].rows;
  for (int64_t e = 0; e < num_experts; ++e) {
    G4_CHECK_MSG(a.gate[e].rows == width && a.gate[e].cols == hidden && a.up[e].rows == width &&
                     a.up[e].cols == hidden && a.down[e].rows == hidden && a.down[e].cols == width,
                 "[cpu] MoeExperts: expert matrix shapes");
  }
  G4_CHECK_MSG(a.out.data != a.x.data, "[cpu] MoeExperts: out may not alias x");

  // Workspace (the layout of MoeWorkspaceBytes).
  const int64_t pairs = rows * top_k;
  G4_CHECK_MSG(a.workspace.dtype == DType::kU8 &&
                   static_cast<size_t>(a.workspace.cols) >= MoeWorkspaceBytes(rows, top_k, hidden, width),
               "[cpu] MoeExperts: workspace smaller than MoeWorkspaceBytes");
  char* ws = static_cast<char*>(a.workspace.data);
  int32_t* order = reinterpret_cast<int32_t*>(ws);
  ws += Aligned(pairs * sizeof(int32_t));
  int32_t* slot = reinterpret_cast<int32_t*>(ws);
  ws += Aligned(pairs * sizeof(int32_t));
  float* in_out = reinterpret_cast<float*>(ws);
  ws += Aligned(pairs * hidden * sizeof(float));
  float* g = reinterpret_cast<float*>(ws);
  ws += Aligned(rows * width * sizeof(float));
  float* u = reinterpret_cast<float*>(ws);

  auto expert_of = [&](int32_t p) { return a.ids.i32()[(p / top_k) * a.ids.stride + p % top_k]; };
  for (int32_t p = 0; p < pairs; ++p) {
    G4_CHECK_MSG(expert_of(p) >= 0 && expert_of(p) < num_experts, "[cpu] MoeExperts: expert id out of range");
    order[p] = p;
  }
  // 1. Pairs by (expert, pair index): keys are distinct, so the order is total.
  std::sort(order, order + pairs, [&](int32_t p, int32_t q) {
    const int32_t ep = expert_of(p), eq = expert_of(q);
    return ep < eq || (ep == eq && p < q);
  });
  for (int32_t i = 0; i < pairs; ++i) slot[order[i]] = i;
  ParallelFor(pairs, MinRowsPerPiece(hidden), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(in_out + i * hidden, a.x.f32() + (order[i] / top_k) * a.x.stride, hidden * sizeof(float));
  });

  // 2. Experts in ascending id, each over its contiguous run of pairs.
  for (int64_t i0 = 0; i0 < pairs;) {
    const int32_t e = expert_of(order[i0]);
    int64_t i1 = i0 + 1;
    while (i1 < pairs && i1 - i0 < rows && expert_of(order[i1]) == e) ++i1;
    const int64_t n = i1 - i0;
    float* xe = in_out + i0 * hidden;
    MatMul(xe, hidden, n, a.gate[e], g, width);
    MatMul(xe, hidden, n, a.up[e], u, width);
    const TensorView gv = TensorView::F32(g, n, width, MemorySpace::kHost);
    GeluMul(gv, TensorView::F32(u, n, width, MemorySpace::kHost), gv);
    MatMul(g, width, n, a.down[e], xe, hidden);
    i0 = i1;
  }

  // 3. Weighted sum per row, ascending expert id.
  ParallelFor(rows, MinRowsPerPiece(top_k * hidden), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int32_t js[kMaxTopK];
      for (int j = 0; j < top_k; ++j) js[j] = j;
      const int32_t* ids = a.ids.i32() + t * a.ids.stride;
      std::sort(js, js + top_k,
                [&](int32_t p, int32_t q) { return ids[p] < ids[q] || (ids[p] == ids[q] && p < q); });
      float* o = a.out.f32() + t * a.out.stride;
      std::memset(o, 0, hidden * sizeof(float));
      for (int jj = 0; jj < top_k; ++jj) {
        const int j = js[jj];
        const VF w = VSet1(a.weights.f32()[t * a.weights.stride + j]);
        const float* d = in_out + static_cast<int64_t>(slot[t * top_k + j]) * hidden;
        int64_t c = 0;
        for (; c + kLanes <= hidden; c += kLanes) VStore(o + c, VFma(w, VLoad(d + c), VLoad(o + c)));
        if (c < hidden) {
          const int rest = static_cast<int>(hidden - c);
          VStoreN(o + c, VFma(w, VLoadN(d + c, rest), VLoadN(o + c, rest)), rest);
        }
      }
    }
  });
}

G4_CPU_END
