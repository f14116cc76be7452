// CpuOps: the Ops implementation for the host CPU. Checks the invariants the
// graph must uphold (shapes, dtypes, supported formats, ids in range; the
// loader has already turned bad files into Status errors) and dispatches to
// the kernels (kernels.h, kv_kernels.h). Every op has finished when it
// returns.
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_variants.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kv_kernels.h"
#include "backend/moe_route.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

void CheckF32(const TensorView& v, const char* what) {
  G4_CHECK_MSG(v.dtype == DType::kF32, what);
  G4_CHECK_MSG(v.rows >= 0 && v.cols >= 0 && (v.rows <= 1 || v.stride >= v.cols), what);
  G4_CHECK_MSG(v.elements() == 0 || v.data != nullptr, what);
}

class CpuOps final : public Ops {
 public:
  void MatMul(const TensorView& x, const WeightMatrix& w, const TensorView& y) override {
    CheckF32(x, "[cpu] MatMul: x must be an F32 view");
    CheckF32(y, "[cpu] MatMul: y must be an F32 view");
    G4_CHECK_MSG(x.cols == w.cols && y.cols == w.rows && x.rows == y.rows,
                 "[cpu] MatMul: shapes do not match W");
    if (x.rows == 0 || w.rows == 0) {
      CheckWeight(w);
      return;
    }
    G4_CPU_NS::MatMul(x.f32(), x.pitch(), x.rows, w, y.f32(), y.pitch());
  }

  // The products one by one: each is MatMul's.
  void MatMuls(const TensorView& x, std::span<const WeightMatrix* const> ws,
               std::span<const TensorView> ys) override {
    G4_CHECK_MSG(!ws.empty() && ws.size() == ys.size() && ws.size() <= static_cast<size_t>(kMaxSharedInputProducts),
                 "[cpu] MatMuls: 1 to kMaxSharedInputProducts weights, one output each");
    for (size_t i = 0; i < ws.size(); ++i) MatMul(x, *ws[i], ys[i]);
  }

  void GatedMatMul(const TensorView& g, const TensorView& u, const WeightMatrix& w, const TensorView& y) override {
    GeluMul(g, u, g);
    MatMul(g, w, y);
  }

  void Embed(const WeightMatrix& table, const int32_t* ids, float scale, const TensorView& out) override {
    CheckWeight(table);
    CheckF32(out, "[cpu] Embed: out must be an F32 view");
    G4_CHECK_MSG(out.cols == table.cols, "[cpu] Embed: out width differs from the table's");
    for (int64_t i = 0; i < out.rows; ++i)
      G4_CHECK_MSG(ids[i] >= 0 && ids[i] < table.rows, "[cpu] Embed: token id out of range");
    if (out.rows == 0) return;
    G4_CPU_NS::Embed(table, ids, out.rows, scale, out.f32(), out.stride);
  }

  void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y) override {
    CheckF32(x, "[cpu] RmsNorm: x must be an F32 view");
    CheckF32(y, "[cpu] RmsNorm: y must be an F32 view");
    G4_CHECK_MSG(x.rows == y.rows && x.cols == y.cols && x.cols > 0, "[cpu] RmsNorm: shapes");
    G4_CHECK_MSG(x.data != y.data || x.stride == y.stride || x.rows <= 1,
                 "[cpu] RmsNorm: in place needs one layout");
    if (x.rows == 0) return;
    G4_CPU_NS::RmsNorm(x.f32(), x.stride, x.rows, x.cols, weight, eps, y.f32(), y.stride);
  }

  void Rope(const TensorView& x, int heads, int head_dim, const int32_t* positions,
            const float* inv_freq) override {
    CheckF32(x, "[cpu] Rope: x must be an F32 view");
    G4_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "[cpu] Rope: head_dim must be even");
    G4_CHECK_MSG(heads >= 0 && x.cols == static_cast<int64_t>(heads) * head_dim,
                 "[cpu] Rope: x width is not heads * head_dim");
    if (x.rows == 0 || heads == 0) return;
    G4_CPU_NS::Rope(x.f32(), x.stride, x.rows, heads, head_dim, positions, inv_freq);
  }

  void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out) override {
    G4_CPU_NS::GeluMul(g, u, out);
  }
  void Add(const TensorView& a, const TensorView& b, const TensorView& y) override {
    G4_CPU_NS::Add(a, b, y);
  }
  // The separate ops in sequence (o normalized in place).
  void AddNorm(const AddNormArgs& a) override {
    G4_CHECK_MSG(a.x.rows == a.o.rows && a.x.cols == a.o.cols, "[cpu] AddNorm: x and o differ in shape");
    RmsNorm(a.o, a.post_weight, a.eps, a.o);
    Add(a.x, a.o, a.x);
    if (a.scale != 1.0f) Scale(a.x, a.scale);
    if (a.next_out.data != nullptr) RmsNorm(a.x, a.next_weight, a.eps, a.next_out);
  }
  // The separate ops in sequence.
  void HeadNormRope(const HeadNormRopeArgs& a) override {
    const int64_t T = a.q.rows, D = a.head_dim;
    G4_CHECK_MSG(D > 0 && a.q.cols == a.q_heads * D, "[cpu] HeadNormRope: q width is not q_heads * head_dim");
    RmsNorm(a.q.Reshape(T * a.q_heads, D), a.q_weight, a.eps, a.q.Reshape(T * a.q_heads, D));
    Rope(a.q, a.q_heads, a.head_dim, a.positions, a.inv_freq);
    if (a.k.data != nullptr) {
      G4_CHECK_MSG(a.k.rows == T && a.k.cols == a.kv_heads * D, "[cpu] HeadNormRope: k is not [T, kv_heads * head_dim]");
      RmsNorm(a.k.Reshape(T * a.kv_heads, D), a.k_weight, a.eps, a.k.Reshape(T * a.kv_heads, D));
      Rope(a.k, a.kv_heads, a.head_dim, a.positions, a.inv_freq);
    }
    if (a.v.data != nullptr) {
      G4_CHECK_MSG(a.v.rows == T && a.v.cols == a.kv_heads * D, "[cpu] HeadNormRope: v is not [T, kv_heads * head_dim]");
      RmsNorm(a.v.Reshape(T * a.kv_heads, D), nullptr, a.eps, a.v.Reshape(T * a.kv_heads, D));
    }
  }
  void Scale(const TensorView& x, float s) override { G4_CPU_NS::Scale(x, s); }
  void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y) override {
    G4_CPU_NS::ScaleColumns(x, col, s, y);
  }
  void Softcap(const TensorView& x, float cap) override { G4_CPU_NS::Softcap(x, cap); }

  void Copy(const TensorView& src, const TensorView& dst) override {
    G4_CHECK_MSG(src.dtype == dst.dtype && src.rows == dst.rows && src.cols == dst.cols,
                 "[cpu] Copy: shapes or dtypes differ");
    if (src.elements() == 0) return;
    const size_t row_bytes = src.cols * src.element_bytes();
    if (src.contiguous() && dst.contiguous()) {
      std::memcpy(dst.data, src.data, src.rows * row_bytes);
      return;
    }
    for (int64_t r = 0; r < src.rows; ++r) std::memcpy(dst.at(r, 0), src.at(r, 0), row_bytes);
  }

  void GatherRows(const TensorView& src, const int32_t* rows, const TensorView& dst) override {
    G4_CHECK_MSG(src.dtype == dst.dtype && src.cols == dst.cols, "[cpu] GatherRows: widths or dtypes differ");
    const size_t row_bytes = src.cols * src.element_bytes();
    for (int64_t i = 0; i < dst.rows; ++i) {
      G4_CHECK_MSG(rows[i] >= 0 && rows[i] < src.rows, "[cpu] GatherRows: row index out of range");
      std::memcpy(dst.at(i, 0), src.at(rows[i], 0), row_bytes);
    }
  }

  void MoeRoute(const TensorView& logits, int top_k, const float* per_expert_scale, const TensorView& ids,
                const TensorView& weights) override {
    CheckF32(logits, "[cpu] MoeRoute: logits must be an F32 view");
    CheckF32(weights, "[cpu] MoeRoute: weights must be an F32 view");
    G4_CHECK_MSG(ids.dtype == DType::kI32, "[cpu] MoeRoute: ids must be I32");
    const int experts = static_cast<int>(logits.cols);
    G4_CHECK_MSG(top_k >= 1 && top_k <= experts, "[cpu] MoeRoute: top_k outside [1, experts]");
    G4_CHECK_MSG(
        ids.rows == logits.rows && weights.rows == logits.rows && ids.cols == top_k && weights.cols == top_k,
        "[cpu] MoeRoute: ids and weights must be [T, top_k]");
    route_prob_.resize(experts);
    route_order_.resize(experts);
    for (int64_t t = 0; t < logits.rows; ++t) {
      RouteTopKInto(logits.f32() + t * logits.stride, experts, top_k, per_expert_scale, route_prob_.data(),
                    route_order_.data(), ids.i32() + t * ids.stride, weights.f32() + t * weights.stride);
    }
  }

  void MoeExperts(const MoeExpertsArgs& args) override { G4_CPU_NS::MoeExperts(args); }

  void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v) override {
    G4_CPU_NS::KvWrite(rows, kv, k, v);
  }
  void PagedAttention(const PagedAttentionArgs& args) override { G4_CPU_NS::PagedAttention(args); }
  void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                      std::span<const int32_t> from_blocks, std::span<const int32_t> to_blocks,
                      std::span<const int32_t> tokens) override {
    G4_CPU_NS::KvRecodeBlocks(from, to, block_size, from_blocks, to_blocks, tokens);
  }

  void SampleRows(const SampleArgs& args) override { G4_CPU_NS::SampleRows(args); }

 private:
  std::vector<float> route_prob_;     // MoeRoute scratch [E], reused across steps
  std::vector<int32_t> route_order_;  // MoeRoute scratch [E]
};

}  // namespace

std::unique_ptr<Ops> MakeCpuOps() { return std::make_unique<CpuOps>(); }

G4_CPU_END
