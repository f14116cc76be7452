#include "io/gemma4_weights.h"

#include <cstring>

#include "core/float16.h"
#include "io/weights_check.h"

namespace g4 {
namespace {

// Shape equality where a stacked [E, R, C] tensor also matches [E*R, C].
bool ShapeMatches(const std::vector<int64_t>& actual, const std::vector<int64_t>& expected) {
  return actual == expected;
}

}  // namespace

// Looks tensors up under the checkpoint's prefix and validates them.
class WeightResolver {
 public:
  WeightResolver(const Gemma4Config& config, Gemma4Weights& w) : config_(config), w_(w) {}

  const TensorInfo* Find(const std::string& rel) const { return FindAt(w_.prefix_ + rel); }
  // By full name, outside the model prefix too (the untied lm_head).
  const TensorInfo* FindAt(const std::string& name) const { return w_.checkpoint_->Find(name); }

  StatusOr<const TensorInfo*> Require(const std::string& rel) const { return RequireAt(w_.prefix_ + rel); }
  StatusOr<const TensorInfo*> RequireAt(const std::string& name) const {
    const TensorInfo* t = FindAt(name);
    if (!t) return NotFound("[weights] missing tensor " + name);
    return t;
  }

  // A float32 copy of a small vector tensor of `n` elements.
  StatusOr<const float*> Vector(const std::string& rel, int64_t n) {
    G4_ASSIGN_OR_RETURN(const TensorInfo* t, Require(rel));
    if (t->numel() != n)
      return Corrupt("[weights] " + t->name + ": shape " + ShapeString(t->shape) + " but config implies [" +
                     std::to_string(n) + "]");
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      switch (t->dtype) {
        case DType::kF32:
          std::memcpy(&v[i], t->data + 4 * i, 4);
          break;
        case DType::kBF16: {
          uint16_t h;
          std::memcpy(&h, t->data + 2 * i, 2);
          v[i] = Bf16ToF32(h);
          break;
        }
        case DType::kF16: {
          uint16_t h;
          std::memcpy(&h, t->data + 2 * i, 2);
          v[i] = F16ToF32(h);
          break;
        }
        default:
          return Unsupported("[weights] " + t->name + ": dtype " + std::string(DTypeName(t->dtype)) +
                             " for a vector (want F32, BF16 or F16)");
      }
    }
    G4_RETURN_IF_ERROR(CheckVectorFinite(v.data(), n, t->name));
    w_.vectors_.push_back(std::move(v));
    return w_.vectors_.back().data();
  }

  // A matrix module `rel` (e.g. "layers.0.self_attn.q_proj") of logical shape
  // lead x [rows, cols]. `suffix` is ".weight" for modules; HF expert tensors
  // have none. Stacked tensors come back flattened to [prod(lead)*rows, cols].
  StatusOr<WeightMatrix> Matrix(const std::string& rel, std::vector<int64_t> lead, int64_t rows, int64_t cols,
                                const std::string& suffix = ".weight") {
    G4_ASSIGN_OR_RETURN(WeightMatrix m, MatrixAt(w_.prefix_ + rel, std::move(lead), rows, cols, suffix));
    // Sampled, not exhaustive: a few rows of each matrix (see weights_check.h).
    G4_RETURN_IF_ERROR(CheckMatrixSampleFinite(m, w_.prefix_ + rel + suffix));
    return m;
  }

  // Matrix() by full module path, unchecked.
  StatusOr<WeightMatrix> MatrixAt(const std::string& module_path, std::vector<int64_t> lead, int64_t rows,
                                  int64_t cols, const std::string& suffix) {
    int64_t stack = 1;
    for (int64_t d : lead) stack *= d;
    const QuantSpec* ov = config_.quantization.Override(module_path);
    const bool has_scales = FindAt(module_path + ".scales") != nullptr;
    const bool quantized = ov ? ov->quantized : has_scales;
    WeightMatrix m;
    m.rows = stack * rows;
    m.cols = cols;
    std::vector<int64_t> expect = lead;
    if (!quantized) {
      G4_ASSIGN_OR_RETURN(const TensorInfo* t, RequireAt(module_path + suffix));
      // Packed codes without their scales: say what is missing rather than
      // reporting the packed shape as a mismatch.
      if (t->dtype == DType::kU32 && config_.quantization.present && !(ov && !ov->quantized))
        return NotFound("[weights] missing tensor " + module_path + ".scales (" + t->name +
                        " holds U32 packed codes, so the module is quantized)");
      expect.push_back(rows);
      expect.push_back(cols);
      if (!ShapeMatches(t->shape, expect))
        return Corrupt("[weights] " + t->name + ": shape " + ShapeString(t->shape) + " but config implies " +
                       ShapeString(expect));
      if (t->dtype != DType::kF32 && t->dtype != DType::kBF16 && t->dtype != DType::kF16)
        return Unsupported("[weights] " + t->name + ": dtype " + std::string(DTypeName(t->dtype)) +
                           " (dense weights must be F32, BF16 or F16" +
                           (t->dtype == DType::kU32 ? "; a U32 weight needs a quantization block" : "") +
                           ")");
      m.format = WeightMatrix::Format::kDense;
      m.dtype = t->dtype;
      m.data = t->data;
      return m;
    }
    const QuantSpec& q = ov ? *ov : config_.quantization.defaults;
    if (!config_.quantization.present && !ov)
      return Corrupt("[weights] " + module_path + " has .scales but config.json has no quantization block");
    if (q.bits <= 0 || q.group_size <= 0 || cols % q.group_size != 0 || (cols * q.bits) % 32 != 0)
      return Unsupported("[weights] " + module_path + ": " + std::to_string(q.bits) + "-bit group " +
                         std::to_string(q.group_size) + " does not divide " + std::to_string(cols) +
                         " columns");
    G4_ASSIGN_OR_RETURN(const TensorInfo* codes, RequireAt(module_path + ".weight"));
    G4_ASSIGN_OR_RETURN(const TensorInfo* scales, RequireAt(module_path + ".scales"));
    G4_ASSIGN_OR_RETURN(const TensorInfo* biases, RequireAt(module_path + ".biases"));
    std::vector<int64_t> code_shape = lead, group_shape = lead;
    code_shape.push_back(rows);
    code_shape.push_back(cols * q.bits / 32);
    group_shape.push_back(rows);
    group_shape.push_back(cols / q.group_size);
    if (codes->dtype != DType::kU32 || !ShapeMatches(codes->shape, code_shape))
      return Corrupt("[weights] " + codes->name + ": " + codes->Describe() + " but " +
                     std::to_string(q.bits) + "-bit group " + std::to_string(q.group_size) + " implies " +
                     ShapeString(code_shape) + " U32");
    for (const TensorInfo* t : {scales, biases}) {
      if (!ShapeMatches(t->shape, group_shape))
        return Corrupt("[weights] " + t->name + ": shape " + ShapeString(t->shape) + " but expected " +
                       ShapeString(group_shape));
      if (t->dtype != DType::kBF16 && t->dtype != DType::kF16 && t->dtype != DType::kF32)
        return Unsupported("[weights] " + t->name + ": dtype " + std::string(DTypeName(t->dtype)));
    }
    if (scales->dtype != biases->dtype)
      return Corrupt("[weights] " + module_path + ": scales and biases differ in dtype");
    m.format = WeightMatrix::Format::kAffine;
    m.bits = q.bits;
    m.group_size = q.group_size;
    m.codes = reinterpret_cast<const uint32_t*>(codes->data);
    m.scale_dtype = scales->dtype;
    m.scales = scales->data;
    m.biases = biases->data;
    return m;
  }

  Status LoadLayer(int l, LayerWeights& lw) {
    const Gemma4Config& c = config_;
    const LayerGeometry& g = c.layers[l];
    const int64_t H = c.hidden_size, D = g.head_dim;
    const std::string p = "layers." + std::to_string(l) + ".";
    G4_ASSIGN_OR_RETURN(lw.input_layernorm, Vector(p + "input_layernorm.weight", H));
    G4_ASSIGN_OR_RETURN(lw.post_attention_layernorm, Vector(p + "post_attention_layernorm.weight", H));
    G4_ASSIGN_OR_RETURN(lw.pre_feedforward_layernorm, Vector(p + "pre_feedforward_layernorm.weight", H));
    G4_ASSIGN_OR_RETURN(lw.post_feedforward_layernorm, Vector(p + "post_feedforward_layernorm.weight", H));
    G4_ASSIGN_OR_RETURN(const float* scalar, Vector(p + "layer_scalar", 1));
    lw.layer_scalar = *scalar;

    G4_ASSIGN_OR_RETURN(lw.q_proj, Matrix(p + "self_attn.q_proj", {}, c.num_attention_heads * D, H));
    G4_ASSIGN_OR_RETURN(lw.q_norm, Vector(p + "self_attn.q_norm.weight", D));
    lw.q_norm_size = D;
    G4_ASSIGN_OR_RETURN(lw.o_proj, Matrix(p + "self_attn.o_proj", {}, H, c.num_attention_heads * D));
    if (!g.kv_shared) {
      G4_ASSIGN_OR_RETURN(lw.k_proj, Matrix(p + "self_attn.k_proj", {}, g.num_kv_heads * D, H));
      G4_ASSIGN_OR_RETURN(lw.k_norm, Vector(p + "self_attn.k_norm.weight", D));
      if (!g.k_eq_v) {
        G4_ASSIGN_OR_RETURN(lw.v_proj, Matrix(p + "self_attn.v_proj", {}, g.num_kv_heads * D, H));
      }
    }

    G4_ASSIGN_OR_RETURN(lw.gate_proj, Matrix(p + "mlp.gate_proj", {}, g.mlp_width, H));
    G4_ASSIGN_OR_RETURN(lw.up_proj, Matrix(p + "mlp.up_proj", {}, g.mlp_width, H));
    G4_ASSIGN_OR_RETURN(lw.down_proj, Matrix(p + "mlp.down_proj", {}, H, g.mlp_width));

    if (c.has_ple()) {
      const int64_t P = c.hidden_size_per_layer_input;
      G4_ASSIGN_OR_RETURN(lw.per_layer_input_gate, Matrix(p + "per_layer_input_gate", {}, P, H));
      G4_ASSIGN_OR_RETURN(lw.per_layer_projection, Matrix(p + "per_layer_projection", {}, H, P));
      G4_ASSIGN_OR_RETURN(lw.post_per_layer_input_norm, Vector(p + "post_per_layer_input_norm.weight", H));
    }

    if (c.enable_moe_block) {
      const int64_t E = c.num_experts, Ie = c.moe_intermediate_size;
      G4_ASSIGN_OR_RETURN(lw.router_proj, Matrix(p + "router.proj", {}, E, H));
      G4_ASSIGN_OR_RETURN(lw.router_scale, Vector(p + "router.scale", H));
      G4_ASSIGN_OR_RETURN(lw.per_expert_scale, Vector(p + "router.per_expert_scale", E));
      G4_ASSIGN_OR_RETURN(lw.pre_feedforward_layernorm_2,
                          Vector(p + "pre_feedforward_layernorm_2.weight", H));
      G4_ASSIGN_OR_RETURN(lw.post_feedforward_layernorm_1,
                          Vector(p + "post_feedforward_layernorm_1.weight", H));
      G4_ASSIGN_OR_RETURN(lw.post_feedforward_layernorm_2,
                          Vector(p + "post_feedforward_layernorm_2.weight", H));
      lw.expert_gate.resize(E);
      lw.expert_up.resize(E);
      lw.expert_down.resize(E);
      const bool mlx = Find(p + "experts.switch_glu.gate_proj.weight") != nullptr;
      if (mlx) {
        G4_ASSIGN_OR_RETURN(WeightMatrix gate, Matrix(p + "experts.switch_glu.gate_proj", {E}, Ie, H));
        G4_ASSIGN_OR_RETURN(WeightMatrix up, Matrix(p + "experts.switch_glu.up_proj", {E}, Ie, H));
        G4_ASSIGN_OR_RETURN(WeightMatrix down, Matrix(p + "experts.switch_glu.down_proj", {E}, H, Ie));
        for (int64_t e = 0; e < E; ++e) {
          lw.expert_gate[e] = gate.RowSlice(e * Ie, Ie);
          lw.expert_up[e] = up.RowSlice(e * Ie, Ie);
          lw.expert_down[e] = down.RowSlice(e * H, H);
        }
      } else {
        G4_ASSIGN_OR_RETURN(WeightMatrix gate_up, Matrix(p + "experts.gate_up_proj", {E}, 2 * Ie, H, ""));
        G4_ASSIGN_OR_RETURN(WeightMatrix down, Matrix(p + "experts.down_proj", {E}, H, Ie, ""));
        for (int64_t e = 0; e < E; ++e) {
          lw.expert_gate[e] = gate_up.RowSlice(e * 2 * Ie, Ie);
          lw.expert_up[e] = gate_up.RowSlice(e * 2 * Ie + Ie, Ie);
          lw.expert_down[e] = down.RowSlice(e * H, H);
        }
      }
    }
    return Status::Ok();
  }

 private:
  const Gemma4Config& config_;
  Gemma4Weights& w_;
};

StatusOr<std::unique_ptr<Gemma4Weights>> Gemma4Weights::Load(const Gemma4Config& config,
                                                             std::unique_ptr<Checkpoint> checkpoint) {
  auto w = std::unique_ptr<Gemma4Weights>(new Gemma4Weights());
  w->checkpoint_ = std::move(checkpoint);
  for (const char* prefix : {"model.language_model.", "language_model.model.", "model."}) {
    if (w->checkpoint_->Find(std::string(prefix) + "embed_tokens.weight")) {
      w->prefix_ = prefix;
      break;
    }
  }
  if (w->prefix_.empty())
    return NotFound("[weights] " + w->checkpoint_->dir() +
                    ": no embed_tokens.weight under model.language_model., language_model.model. or model.");
  WeightResolver r(config, *w);
  w->hidden_size_ = config.hidden_size;
  w->ple_width_ = config.hidden_size_per_layer_input;
  const int64_t V = config.vocab_size, H = config.hidden_size;
  G4_ASSIGN_OR_RETURN(w->embed_tokens, r.Matrix("embed_tokens", {}, V, H));
  G4_ASSIGN_OR_RETURN(w->final_norm, r.Vector("norm.weight", H));
  if (!config.tie_word_embeddings) {
    // HF keeps an untied head outside the language model, MLX inside it.
    const std::string candidates[] = {"lm_head", "language_model.lm_head", "model.language_model.lm_head",
                                      "model.lm_head"};
    std::string found;
    for (const std::string& c : candidates) {
      if (w->checkpoint_->Find(c + ".weight")) {
        found = c;
        break;
      }
    }
    if (found.empty())
      return NotFound("[weights] config.json says tie_word_embeddings: false, but the checkpoint has no "
                      "lm_head.weight (looked for lm_head, language_model.lm_head, model.language_model.lm_head)");
    G4_ASSIGN_OR_RETURN(w->lm_head, r.MatrixAt(found, {}, V, H, ".weight"));
    G4_RETURN_IF_ERROR(CheckMatrixSampleFinite(w->lm_head, found + ".weight"));
  }
  if (config.has_ple()) {
    const int64_t NP = static_cast<int64_t>(config.num_hidden_layers) * config.hidden_size_per_layer_input;
    G4_ASSIGN_OR_RETURN(w->embed_tokens_per_layer,
                        r.Matrix("embed_tokens_per_layer", {}, config.vocab_size_per_layer_input, NP));
    G4_ASSIGN_OR_RETURN(w->per_layer_model_projection, r.Matrix("per_layer_model_projection", {}, NP, H));
    G4_ASSIGN_OR_RETURN(w->per_layer_projection_norm,
                        r.Vector("per_layer_projection_norm.weight", config.hidden_size_per_layer_input));
  }
  w->layers.resize(config.num_hidden_layers);
  for (int l = 0; l < config.num_hidden_layers; ++l) G4_RETURN_IF_ERROR(r.LoadLayer(l, w->layers[l]));
  return w;
}

void Gemma4Weights::ForEachTensor(const MatrixVisitor& matrix, const VectorVisitor& vector) {
  auto m = [&](const std::string& name, WeightMatrix& w) {
    if (w.rows > 0) matrix(name, w);
  };
  auto v = [&](const std::string& name, const float*& data, int64_t n) {
    if (data) vector(name, data, n);
  };
  const int64_t H = hidden_size_;
  m("embed_tokens", embed_tokens);
  m("lm_head", lm_head);  // empty (skipped) when tied
  v("norm", final_norm, H);
  m("embed_tokens_per_layer", embed_tokens_per_layer);
  m("per_layer_model_projection", per_layer_model_projection);
  v("per_layer_projection_norm", per_layer_projection_norm, ple_width_);
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerWeights& lw = layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    v(p + "input_layernorm", lw.input_layernorm, H);
    v(p + "post_attention_layernorm", lw.post_attention_layernorm, H);
    v(p + "pre_feedforward_layernorm", lw.pre_feedforward_layernorm, H);
    v(p + "post_feedforward_layernorm", lw.post_feedforward_layernorm, H);
    m(p + "q_proj", lw.q_proj);
    m(p + "k_proj", lw.k_proj);
    m(p + "v_proj", lw.v_proj);
    m(p + "o_proj", lw.o_proj);
    v(p + "q_norm", lw.q_norm, lw.q_norm_size);
    v(p + "k_norm", lw.k_norm, lw.q_norm_size);
    m(p + "gate_proj", lw.gate_proj);
    m(p + "up_proj", lw.up_proj);
    m(p + "down_proj", lw.down_proj);
    m(p + "per_layer_input_gate", lw.per_layer_input_gate);
    m(p + "per_layer_projection", lw.per_layer_projection);
    v(p + "post_per_layer_input_norm", lw.post_per_layer_input_norm, H);
    m(p + "router_proj", lw.router_proj);
    v(p + "router_scale", lw.router_scale, H);
    v(p + "per_expert_scale", lw.per_expert_scale, static_cast<int64_t>(lw.expert_gate.size()));
    v(p + "pre_feedforward_layernorm_2", lw.pre_feedforward_layernorm_2, H);
    v(p + "post_feedforward_layernorm_1", lw.post_feedforward_layernorm_1, H);
    v(p + "post_feedforward_layernorm_2", lw.post_feedforward_layernorm_2, H);
    for (size_t e = 0; e < lw.expert_gate.size(); ++e) {
      const std::string x = p + "experts." + std::to_string(e) + ".";
      m(x + "gate", lw.expert_gate[e]);
      m(x + "up", lw.expert_up[e]);
      m(x + "down", lw.expert_down[e]);
    }
  }
}

size_t Gemma4Weights::DecodeBytesPerToken(const Gemma4Config& config) const {
  auto row_bytes = [](const WeightMatrix& m) { return m.rows ? m.StoredBytes() / m.rows : 0; };
  // Lookup row + the head (the embedding itself when tied).
  size_t total = row_bytes(embed_tokens) + (lm_head.rows ? lm_head : embed_tokens).StoredBytes();
  if (config.has_ple()) total += row_bytes(embed_tokens_per_layer) + per_layer_model_projection.StoredBytes();
  for (const LayerWeights& l : layers) {
    for (const WeightMatrix* m :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj,
          &l.per_layer_input_gate, &l.per_layer_projection, &l.router_proj})
      total += m->StoredBytes();
    if (!l.expert_gate.empty()) {
      const size_t per_expert =
          l.expert_gate[0].StoredBytes() + l.expert_up[0].StoredBytes() + l.expert_down[0].StoredBytes();
      total += per_expert * static_cast<size_t>(config.top_k_experts);
    }
  }
  return total;
}

}  // namespace g4
