// CpuOps: the Ops implementation for the host CPU. Checks the invariants the
// graph must uphold (shapes, supported formats; the loader has already
// turned bad files into Status errors) and dispatches to the kernels.
#include <memory>

#include "backend/cpu/kernels.h"
#include "backend/ops.h"
#include "core/check.h"

namespace g4 {
namespace {

void CheckWeight(const WeightMatrix& w) {
  if (w.is_affine()) {
    G4_CHECK_MSG(w.bits == 2 || w.bits == 3 || w.bits == 4 || w.bits == 5 || w.bits == 6 || w.bits == 8,
                 "[cpu] affine bit width must be 2, 3, 4, 5, 6 or 8");
    G4_CHECK_MSG(w.group_size == 32 || w.group_size == 64 || w.group_size == 128,
                 "[cpu] affine group size must be 32, 64 or 128");
    G4_CHECK_MSG(w.cols % w.group_size == 0, "[cpu] affine columns must be whole groups");
    G4_CHECK_MSG(w.scale_dtype == DType::kBF16 || w.scale_dtype == DType::kF16 ||
                     w.scale_dtype == DType::kF32,
                 "[cpu] affine scales must be BF16, F16 or F32");
    G4_CHECK(w.rows == 0 || (w.codes && w.scales && w.biases));
  } else {
    G4_CHECK_MSG(w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16,
                 "[cpu] dense weights must be F32, BF16 or F16");
    G4_CHECK(w.rows == 0 || w.cols == 0 || w.data);
  }
  G4_CHECK(w.rows >= 0 && w.cols >= 0);
}

class CpuOps final : public Ops {
 public:
  void MatMul(const float* x, int64_t m_rows, const WeightMatrix& w, float* y) override {
    CheckWeight(w);
    G4_CHECK(m_rows >= 0);
    if (m_rows == 0 || w.rows == 0) return;
    if (m_rows <= cpu::kGemvMaxRows) {
      if (w.is_affine()) {
        cpu::GemvAffine(x, m_rows, w, y);
      } else {
        cpu::GemvDense(x, m_rows, w, y);
      }
    } else {
      cpu::Gemm(x, m_rows, w, y);
    }
  }

  void Embed(const WeightMatrix& table, const int32_t* ids, int64_t n, float scale, float* out) override {
    CheckWeight(table);
    for (int64_t i = 0; i < n; ++i)
      G4_CHECK_MSG(ids[i] >= 0 && ids[i] < table.rows, "[cpu] Embed: token id out of range");
    cpu::Embed(table, ids, n, scale, out);
  }

  void RmsNorm(const float* x, int64_t rows, int64_t d, const float* weight, float eps, float* y) override {
    G4_CHECK(rows >= 0 && d > 0);
    cpu::RmsNorm(x, rows, d, weight, eps, y);
  }

  void Rope(float* x, int64_t tokens, int heads, int head_dim, const int32_t* positions,
            const float* inv_freq) override {
    G4_CHECK_MSG(head_dim > 0 && head_dim % 2 == 0, "[cpu] Rope: head_dim must be even");
    G4_CHECK(tokens >= 0 && heads >= 0);
    cpu::Rope(x, tokens, heads, head_dim, positions, inv_freq);
  }

  void Attention(const AttentionArgs& a) override {
    G4_CHECK(a.num_heads > 0 && a.num_kv_heads > 0 && a.head_dim > 0);
    G4_CHECK_MSG(a.num_heads % a.num_kv_heads == 0, "[cpu] Attention: heads not a multiple of KV heads");
    G4_CHECK_MSG(a.num_keys == 0 || a.kv_stride >= static_cast<int64_t>(a.num_kv_heads) * a.head_dim,
                 "[cpu] Attention: kv_stride shorter than one key");
    G4_CHECK(a.num_queries >= 0 && a.num_keys >= 0 && a.window >= 0);
    if (a.num_queries == 0) return;
    cpu::Attention(a);
  }

  void GeluMul(const float* g, const float* u, int64_t n, float* out) override { cpu::GeluMul(g, u, n, out); }
  void Add(const float* a, const float* b, int64_t n, float* y) override { cpu::Add(a, b, n, y); }
  void Scale(float* x, int64_t n, float s) override { cpu::Scale(x, n, s); }
  void Softcap(float* x, int64_t n, float cap) override { cpu::Softcap(x, n, cap); }
};

}  // namespace

std::unique_ptr<Ops> MakeCpuOps() { return std::make_unique<CpuOps>(); }

}  // namespace g4
