#include "model/gemma4_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/float16.h"
#include "model/rope.h"
#include "model/router.h"

namespace g4 {
namespace {
template <typename T>
T* Sized(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}
}  // namespace

StatusOr<std::unique_ptr<Gemma4Model>> Gemma4Model::Load(const std::string& dir, Ops* ops) {
  auto m = std::unique_ptr<Gemma4Model>(new Gemma4Model());
  m->ops_ = ops;
  G4_ASSIGN_OR_RETURN(m->config_, LoadGemma4Config(dir));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::Open(dir));
  G4_ASSIGN_OR_RETURN(m->weights_, Gemma4Weights::Load(m->config_, std::move(ckpt)));
  const Gemma4Config& c = m->config_;
  int sliding_dim = 0, full_dim = 0;
  for (const LayerGeometry& g : c.layers)
    (g.type == AttentionType::kFull ? full_dim : sliding_dim) = g.head_dim;
  if (sliding_dim) {
    G4_ASSIGN_OR_RETURN(m->inv_freq_sliding_, RopeInverseFrequencies(c.rope_sliding, sliding_dim));
  }
  if (full_dim) {
    G4_ASSIGN_OR_RETURN(m->inv_freq_full_, RopeInverseFrequencies(c.rope_full, full_dim));
  }
  for (const LayerGeometry& g : c.layers) {
    const int want = g.type == AttentionType::kFull ? full_dim : sliding_dim;
    if (g.head_dim != want)
      return Unsupported("[model] layers of one attention type with different head dims");
  }
  // transformers multiplies by sqrt(H) cast to the embedding's dtype (spec 3.2).
  const WeightMatrix& e = m->weights_->embed_tokens;
  m->embed_scale_ = std::sqrt(static_cast<float>(c.hidden_size));
  if (!e.is_affine() && e.dtype == DType::kBF16) m->embed_scale_ = RoundBf16(m->embed_scale_);
  if (!e.is_affine() && e.dtype == DType::kF16) m->embed_scale_ = F16ToF32(F32ToF16(m->embed_scale_));
  return m;
}

Status Gemma4Model::ForwardChunked(const int32_t* ids, int64_t n, int64_t chunk, SequenceKv& kv,
                                   float* logits, bool all_logits) {
  if (chunk <= 0) return InvalidArgument("[model] chunk size must be positive");
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      return InvalidArgument("[model] token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                             " is outside the vocabulary (size " + std::to_string(config_.vocab_size) + ")");
  for (int64_t begin = 0, len = 0; begin < n; begin += len) {
    len = std::min(chunk, n - begin);
    // A cache about to change precision takes only the tokens up to its
    // boundary, so the change lands at the same token however the prompt is
    // chunked (the first chunk of a fresh sequence is never split for this).
    if (kv.position() > 0) {
      int64_t room = kv.max_append_tokens();
      if (room == 0) {  // a change is due: make it before this chunk
        G4_RETURN_IF_ERROR(kv.Maintain());
        room = kv.max_append_tokens();
      }
      if (room > 0) len = std::min(len, room);
    }
    const bool last = begin + len == n;
    float* out = all_logits ? logits + begin * config_.vocab_size : (last ? logits : nullptr);
    G4_RETURN_IF_ERROR(Forward(ids + begin, len, kv, out, all_logits));
  }
  return Status::Ok();
}

Status Gemma4Model::Forward(const int32_t* ids, int64_t n, SequenceKv& kv, float* logits, bool all_logits) {
  const Gemma4Config& c = config_;
  if (n <= 0) return InvalidArgument("[model] no tokens to run");
  if (kv.num_layers() != c.num_hidden_layers)
    return InvalidArgument("[model] KV state built for another model");
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return InvalidArgument("[model] token id " + std::to_string(ids[i]) +
                             " is outside the vocabulary (size " + std::to_string(c.vocab_size) + ")");
  const int64_t H = c.hidden_size;
  int32_t* pos = Sized(s_.pos, n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(kv.position() + i);

  float* x = Sized(s_.x, n * H);
  ops_->Embed(weights_->embed_tokens, ids, n, embed_scale_, x);
  if (c.has_ple()) ComputePle(ids, n);

  std::vector<KvView> views(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    AttentionBlock(l, n, views, kv);
    FeedForwardBlock(l, n);
    if (c.has_ple()) PleBlock(l, n);
    ops_->Scale(x, n * H, weights_->layers[l].layer_scalar);
  }
  kv.Advance(n);

  if (logits) {
    const int64_t rows = all_logits ? n : 1;
    const float* last = x + (n - rows) * H;
    float* normed = Sized(s_.a, rows * H);
    ops_->RmsNorm(last, rows, H, weights_->final_norm, static_cast<float>(c.rms_norm_eps), normed);
    ops_->MatMul(normed, rows, weights_->embed_tokens, logits);
    if (c.final_logit_softcapping > 0)
      ops_->Softcap(logits, rows * c.vocab_size, static_cast<float>(c.final_logit_softcapping));
  }
  return Status::Ok();
}

Status Gemma4Model::PerLayerInputs(const int32_t* ids, int64_t n, std::vector<float>* out) {
  out->clear();
  if (!config_.has_ple()) return Status::Ok();
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size) return InvalidArgument("[model] token id out of vocabulary");
  ops_->Embed(weights_->embed_tokens, ids, n, embed_scale_, Sized(s_.x, n * config_.hidden_size));
  ComputePle(ids, n);
  out->assign(s_.ple.begin(), s_.ple.begin() + n * config_.num_hidden_layers * config_.hidden_size_per_layer_input);
  return Status::Ok();
}

// Per-layer inputs, once per forward (spec 3.3): s_.ple = [n, N*P].
void Gemma4Model::ComputePle(const int32_t* ids, int64_t n) {
  const Gemma4Config& c = config_;
  const int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input, NP = c.num_hidden_layers * P;
  float* ple = Sized(s_.ple, n * NP);
  float* tok = Sized(s_.z, n * NP);
  ops_->MatMul(s_.x.data(), n, weights_->per_layer_model_projection, ple);
  ops_->Scale(ple, n * NP, 1.0f / std::sqrt(static_cast<float>(H)));
  ops_->RmsNorm(ple, n * c.num_hidden_layers, P, weights_->per_layer_projection_norm,
                static_cast<float>(c.rms_norm_eps), ple);
  ops_->Embed(weights_->embed_tokens_per_layer, ids, n, std::sqrt(static_cast<float>(P)), tok);
  ops_->Add(ple, tok, n * NP, ple);
  ops_->Scale(ple, n * NP, 1.0f / std::sqrt(2.0f));
}

void Gemma4Model::AttentionBlock(int l, int64_t n, std::vector<KvView>& views, SequenceKv& kv) {
  const Gemma4Config& c = config_;
  const LayerGeometry& g = c.layers[l];
  const LayerWeights& lw = weights_->layers[l];
  const int64_t H = c.hidden_size, D = g.head_dim, nH = c.num_attention_heads, nKV = g.num_kv_heads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float* inv_freq = g.type == AttentionType::kFull ? inv_freq_full_.data() : inv_freq_sliding_.data();
  float* x = s_.x.data();
  float* a = Sized(s_.a, n * H);
  ops_->RmsNorm(x, n, H, lw.input_layernorm, eps, a);

  float* q = Sized(s_.q, n * nH * D);
  ops_->MatMul(a, n, lw.q_proj, q);
  ops_->RmsNorm(q, n * nH, D, lw.q_norm, eps, q);
  ops_->Rope(q, n, static_cast<int>(nH), static_cast<int>(D), s_.pos.data(), inv_freq);

  if (g.kv_shared) {
    views[l] = views[g.donor];  // the donor's cache-complete view of this same step
  } else {
    float* k = Sized(s_.k, n * nKV * D);
    float* v = Sized(s_.v, n * nKV * D);
    ops_->MatMul(a, n, lw.k_proj, k);
    if (g.k_eq_v) {
      std::memcpy(v, k, n * nKV * D * sizeof(float));  // V reads the raw K projection
    } else {
      ops_->MatMul(a, n, lw.v_proj, v);
    }
    ops_->RmsNorm(k, n * nKV, D, lw.k_norm, eps, k);
    ops_->Rope(k, n, static_cast<int>(nKV), static_cast<int>(D), s_.pos.data(), inv_freq);
    ops_->RmsNorm(v, n * nKV, D, nullptr, eps, v);
    views[l] = kv.layer(l)->AppendAndView(k, v, s_.pos.data(), n);
  }

  const KvView& view = views[l];
  AttentionArgs args;
  args.q = q;
  args.q_pos = s_.pos.data();
  args.num_queries = n;
  args.num_heads = static_cast<int>(nH);
  args.num_kv_heads = static_cast<int>(nKV);
  args.head_dim = static_cast<int>(D);
  args.k = view.k;
  args.v = view.v;
  args.k_pos = view.pos;
  args.num_keys = view.num_keys;
  args.kv_stride = view.stride;
  args.window = g.type == AttentionType::kSliding ? c.sliding_window : 0;
  args.scale = 1.0f;
  args.out = Sized(s_.attn, n * nH * D);
  if (view.attention) {
    view.attention->Attend(*ops_, args);  // over the cache's own representation (kv/layer_cache.h)
  } else {
    ops_->Attention(args);
  }

  float* o = Sized(s_.o, n * H);
  ops_->MatMul(args.out, n, lw.o_proj, o);
  ops_->RmsNorm(o, n, H, lw.post_attention_layernorm, eps, o);
  ops_->Add(x, o, n * H, x);
}

// out = down(gelu(gate(in)) * up(in)), width = the MLP's intermediate size.
void Gemma4Model::DenseMlp(const LayerWeights& lw, int width, const float* in, int64_t n, float* out) {
  float* g = Sized(s_.g, n * width);
  float* u = Sized(s_.u, n * width);
  ops_->MatMul(in, n, lw.gate_proj, g);
  ops_->MatMul(in, n, lw.up_proj, u);
  ops_->GeluMul(g, u, n * width, g);
  ops_->MatMul(g, n, lw.down_proj, out);
}

void Gemma4Model::FeedForwardBlock(int l, int64_t n) {
  const Gemma4Config& c = config_;
  const LayerWeights& lw = weights_->layers[l];
  const int64_t H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* x = s_.x.data();
  float* a = Sized(s_.a, n * H);
  float* d = Sized(s_.d, n * H);
  ops_->RmsNorm(x, n, H, lw.pre_feedforward_layernorm, eps, a);
  DenseMlp(lw, c.layers[l].mlp_width, a, n, d);
  if (!c.enable_moe_block) {
    ops_->RmsNorm(d, n, H, lw.post_feedforward_layernorm, eps, d);
    ops_->Add(x, d, n * H, x);
    return;
  }
  ops_->RmsNorm(d, n, H, lw.post_feedforward_layernorm_1, eps, d);

  // Router (spec 3.5): unscaled norm of the residual, x router.scale x H^-1/2.
  const int E = c.num_experts, Ie = c.moe_intermediate_size;
  ops_->RmsNorm(x, n, H, nullptr, eps, a);
  std::vector<float> scale(lw.router_scale, lw.router_scale + H);
  const float inv_sqrt_h = 1.0f / std::sqrt(static_cast<float>(H));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < H; ++i) a[t * H + i] = a[t * H + i] * scale[i] * inv_sqrt_h;
  float* router_logits = Sized(s_.router, n * E);
  ops_->MatMul(a, n, lw.router_proj, router_logits);
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(E);  // expert -> (token, weight)
  for (int64_t t = 0; t < n; ++t) {
    Route r = RouteTopK(router_logits + t * E, E, c.top_k_experts, lw.per_expert_scale);
    for (size_t j = 0; j < r.experts.size(); ++j) by_expert[r.experts[j]].push_back({t, r.weights[j]});
  }

  // Experts read their own pre-norm of the residual; tokens are grouped per expert.
  ops_->RmsNorm(x, n, H, lw.pre_feedforward_layernorm_2, eps, a);
  float* d2 = Sized(s_.d2, n * H);
  std::fill(d2, d2 + n * H, 0.0f);
  std::vector<float> in, g, u, y;
  for (int e = 0; e < E; ++e) {
    const auto& rows = by_expert[e];
    if (rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(rows.size());
    in.resize(m * H);
    for (int64_t i = 0; i < m; ++i) std::memcpy(&in[i * H], a + rows[i].first * H, H * sizeof(float));
    g.resize(m * Ie);
    u.resize(m * Ie);
    y.resize(m * H);
    ops_->MatMul(in.data(), m, lw.expert_gate[e], g.data());
    ops_->MatMul(in.data(), m, lw.expert_up[e], u.data());
    ops_->GeluMul(g.data(), u.data(), m * Ie, g.data());
    ops_->MatMul(g.data(), m, lw.expert_down[e], y.data());
    for (int64_t i = 0; i < m; ++i) {
      float* dst = d2 + rows[i].first * H;
      const float w = rows[i].second;
      for (int64_t j = 0; j < H; ++j) dst[j] += w * y[i * H + j];
    }
  }
  ops_->RmsNorm(d2, n, H, lw.post_feedforward_layernorm_2, eps, d2);
  ops_->Add(d, d2, n * H, d);
  ops_->RmsNorm(d, n, H, lw.post_feedforward_layernorm, eps, d);
  ops_->Add(x, d, n * H, x);
}

void Gemma4Model::PleBlock(int l, int64_t n) {
  const Gemma4Config& c = config_;
  const LayerWeights& lw = weights_->layers[l];
  const int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input, NP = c.num_hidden_layers * P;
  float* x = s_.x.data();
  float* z = Sized(s_.g, n * P);
  float* pli = Sized(s_.pli_l, n * P);
  for (int64_t t = 0; t < n; ++t) std::memcpy(pli + t * P, s_.ple.data() + t * NP + l * P, P * sizeof(float));
  ops_->MatMul(x, n, lw.per_layer_input_gate, z);
  ops_->GeluMul(z, pli, n * P, z);
  float* o = Sized(s_.o, n * H);
  ops_->MatMul(z, n, lw.per_layer_projection, o);
  ops_->RmsNorm(o, n, H, lw.post_per_layer_input_norm, static_cast<float>(c.rms_norm_eps), o);
  ops_->Add(x, o, n * H, x);
}

}  // namespace g4
