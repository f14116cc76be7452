#include "model/activations.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace g4 {
namespace {

constexpr size_t kAlign = 256;  // bytes; every buffer starts aligned for any backend's vector loads

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Carves consecutive aligned regions out of one allocation: a first pass
// (base null) only measures.
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  void* Take(size_t bytes) {
    void* p = base_ ? base_ + used_ : nullptr;
    used_ += AlignUp(bytes);
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

}  // namespace

// Lays out every buffer for limits_ (max_table_width resolved) over fbase /
// ibase, or only measures when they are null: returns the float and int
// bytes.
std::pair<size_t, size_t> Activations::Layout(const Gemma4Config& c, char* fbase, char* ibase) {
  Activations& a = *this;
  const ActivationLimits& L = limits_;
  // Widths from the geometry: the widest layer of each kind.
  const int64_t H = c.hidden_size;
  int64_t q_width = 0, kv_width = 0, mlp_width = 0;
  for (const LayerGeometry& g : c.layers) {
    q_width = std::max<int64_t>(q_width, static_cast<int64_t>(c.num_attention_heads) * g.head_dim);
    kv_width = std::max<int64_t>(kv_width, static_cast<int64_t>(g.num_kv_heads) * g.head_dim);
    mlp_width = std::max<int64_t>(mlp_width, g.mlp_width);
  }
  const int64_t P = c.hidden_size_per_layer_input;
  const int64_t NP = static_cast<int64_t>(c.num_hidden_layers) * P;
  mlp_width = std::max(mlp_width, P);  // the PLE gate reuses g
  const int64_t E = c.enable_moe_block ? c.num_experts : 0;
  const int64_t K = c.enable_moe_block ? c.top_k_experts : 0;
  const size_t moe_bytes = c.enable_moe_block ? MoeWorkspaceBytes(L.max_rows, static_cast<int>(K), H,
                                                                  c.moe_intermediate_size)
                                              : 0;
  const int64_t T = L.max_rows, R = L.max_outputs, V = c.vocab_size;

  Carver f(fbase), i(ibase);
  auto mat = [&](int64_t rows, int64_t cols) {
    return TensorView::F32(static_cast<float*>(f.Take(rows * cols * sizeof(float))), rows, cols, a.space_);
  };
  a.x = mat(T, H);
  a.a = mat(T, H);
  a.o = mat(T, H);
  a.q = mat(T, q_width);
  a.attn = mat(T, q_width);
  a.k = mat(T, kv_width);
  a.v = mat(T, kv_width);
  a.g = mat(T, mlp_width);
  a.u = mat(T, mlp_width);
  a.d = mat(T, H);
  a.d2 = mat(T, H);
  a.ple = mat(NP ? T : 0, NP);
  a.ple_tok = mat(NP ? T : 0, NP);
  a.router = mat(E ? T : 0, E);
  a.expert_weights = mat(K ? T : 0, K);
  a.hidden_out = mat(R, H);
  a.logits = mat(R, V);
  a.moe_workspace = TensorView::Of(f.Take(moe_bytes), DType::kU8, moe_bytes ? 1 : 0,
                                   static_cast<int64_t>(moe_bytes), a.space_);

  auto ints = [&](int64_t n) { return static_cast<int32_t*>(i.Take(n * sizeof(int32_t))); };
  a.expert_ids = TensorView::I32(ints(K ? T * K : 0), K ? T : 0, K, a.space_);
  a.token_ids = ints(T);
  a.positions = ints(T);
  a.row_seq = ints(T);
  a.query_start = ints(L.max_seqs + 1);
  a.kv_len = ints(L.max_seqs);
  a.output_rows = ints(R);
  for (int grp = 0; grp < 2; ++grp) {
    a.block_table[grp] = ints(L.max_seqs * L.max_table_width);
    a.seq_store[grp] = static_cast<uint8_t*>(i.Take(L.max_seqs));
  }
  return std::make_pair(f.used(), i.used());
}

ActivationLimits Activations::Resolved(const Gemma4Config& c, const ActivationLimits& limits, int block_size) {
  ActivationLimits L = limits;
  if (L.max_table_width <= 0)
    L.max_table_width = (std::max(c.max_position_embeddings, 1) + block_size - 1) / block_size + 1;
  return L;
}

size_t Activations::Bytes(const Gemma4Config& config, const ActivationLimits& limits, int block_size) {
  Activations measure;
  measure.limits_ = Resolved(config, limits, block_size);
  const auto [float_bytes, int_bytes] = measure.Layout(config, nullptr, nullptr);
  return float_bytes + int_bytes;
}

StatusOr<Activations> Activations::Create(const Gemma4Config& c, Backend& backend, const ActivationLimits& limits,
                                          int block_size) {
  if (limits.max_rows <= 0 || limits.max_seqs <= 0 || limits.max_outputs <= 0 || block_size <= 0)
    return InvalidArgument("[model] activation limits must be positive");
  Activations act;
  act.limits_ = Resolved(c, limits, block_size);
  act.space_ = backend.space();
  const ActivationLimits& L = act.limits_;
  // Two passes over the same layout: measure, then carve the allocation.
  const auto [float_bytes, int_bytes] = act.Layout(c, nullptr, nullptr);
  G4_ASSIGN_OR_RETURN(act.floats_, backend.Allocate(float_bytes, "activations"));
  G4_ASSIGN_OR_RETURN(act.ints_, backend.Allocate(int_bytes, "step arrays"));
  act.Layout(c, act.floats_.as<char>(), act.ints_.as<char>());
  act.host_table_.resize(static_cast<size_t>(2 * L.max_seqs * L.max_table_width));
  act.host_store_.resize(static_cast<size_t>(2 * L.max_seqs));
  return act;
}

TensorView Activations::Flat(const TensorView& buffer, int64_t rows, int64_t cols) {
  G4_CHECK_MSG(rows * cols <= buffer.rows * buffer.cols, "[model] activation view larger than its buffer");
  return TensorView::Of(buffer.data, buffer.dtype, rows, cols, buffer.space);
}

}  // namespace g4
