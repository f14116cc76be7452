#include "model/gemma4_model.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "backend/ops.h"
#include "core/float16.h"
#include "model/rope.h"

namespace g4 {

// The step's views of the activation buffers and its device arrays.
struct Gemma4Model::StepViews {
  int64_t T = 0, S = 0, R = 0;
  StepRows rows;
  KvStepTables tables[kNumKvGroups];
  TensorView x, a, o, d, d2;  // [T, H]
};

StatusOr<std::unique_ptr<Gemma4Model>> Gemma4Model::Load(const std::string& dir, Backend& backend) {
  auto m = std::unique_ptr<Gemma4Model>(new Gemma4Model());
  m->backend_ = &backend;
  G4_ASSIGN_OR_RETURN(m->config_, LoadGemma4Config(dir));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::Open(dir));
  G4_ASSIGN_OR_RETURN(m->weights_, Gemma4Weights::Load(m->config_, std::move(ckpt)));
  const Gemma4Config& c = m->config_;
  int sliding_dim = 0, full_dim = 0;
  for (const LayerGeometry& g : c.layers) (g.type == AttentionType::kFull ? full_dim : sliding_dim) = g.head_dim;
  for (const LayerGeometry& g : c.layers) {
    const int want = g.type == AttentionType::kFull ? full_dim : sliding_dim;
    if (g.head_dim != want) return Unsupported("[model] layers of one attention type with different head dims");
  }
  if (sliding_dim) {
    G4_ASSIGN_OR_RETURN(std::vector<float> f, RopeInverseFrequencies(c.rope_sliding, sliding_dim));
    G4_ASSIGN_OR_RETURN(m->inv_freq_sliding_, UploadConstant(backend, f.data(), f.size() * sizeof(float), "rope"));
  }
  if (full_dim) {
    G4_ASSIGN_OR_RETURN(std::vector<float> f, RopeInverseFrequencies(c.rope_full, full_dim));
    G4_ASSIGN_OR_RETURN(m->inv_freq_full_, UploadConstant(backend, f.data(), f.size() * sizeof(float), "rope"));
  }
  // transformers multiplies by sqrt(H) cast to the embedding's dtype (spec 3.2).
  const WeightMatrix& e = m->weights_->embed_tokens;
  m->embed_scale_ = std::sqrt(static_cast<float>(c.hidden_size));
  if (!e.is_affine() && e.dtype == DType::kBF16) m->embed_scale_ = RoundBf16(m->embed_scale_);
  if (!e.is_affine() && e.dtype == DType::kF16) m->embed_scale_ = F16ToF32(F32ToF16(m->embed_scale_));
  G4_RETURN_IF_ERROR(backend.PlaceWeights(*m->weights_));
  return m;
}

Status Gemma4Model::Forward(const StepBatch& step, KvPool& pool, Activations& act) {
  G4_RETURN_IF_ERROR(step.Validate(config_.vocab_size));
  const ActivationLimits& L = act.limits();
  if (step.num_rows() > L.max_rows || step.num_seqs() > L.max_seqs || step.num_outputs() > L.max_outputs)
    return InvalidArgument("[model] step of " + std::to_string(step.num_rows()) + " rows, " +
                           std::to_string(step.num_seqs()) + " sequences, " + std::to_string(step.num_outputs()) +
                           " outputs exceeds the activations' limits (" + std::to_string(L.max_rows) + ", " +
                           std::to_string(L.max_seqs) + ", " + std::to_string(L.max_outputs) + ")");
  for (int grp = 0; grp < kNumKvGroups; ++grp)
    if (pool.TableWidth(step.seqs, static_cast<KvGroup>(grp)) > L.max_table_width)
      return InvalidArgument("[model] a sequence is longer than the activations' block tables allow");

  StepViews sv;
  Upload(step, pool, act, sv);
  // Every op argument below is a function of this key (the step's shape,
  // its bucketed bounds and the buffers), so a backend may replay a
  // recording of an earlier step with the same key (Backend::Replay).
  const uint64_t key = StepKey(sv, step.compute_logits, pool, act);
  if (backend_->Replay(key)) return Status::Ok();
  const bool capturing = backend_->BeginCapture(key);
  Ops& ops = backend_->ops();
  ops.Embed(weights_->embed_tokens, act.token_ids, embed_scale_, sv.x);
  if (config_.has_ple()) ComputePle(sv, act);
  // Each residual update also computes the next norm (Ops::AddNorm): the
  // attention block's gives the feed-forward input, a layer's last one the
  // next layer's attention input; only layer 0's input norm stands alone.
  ops.RmsNorm(sv.x, weights_->layers[0].input_layernorm, static_cast<float>(config_.rms_norm_eps), sv.a);
  for (int l = 0; l < config_.num_hidden_layers; ++l) {
    AttentionBlock(l, sv, pool, act);
    FeedForwardBlock(l, sv, act);
    if (config_.has_ple()) PleBlock(l, sv, act);
  }
  if (sv.R > 0) Head(sv, step.compute_logits, act);
  if (capturing) backend_->EndCapture();
  return Status::Ok();
}

uint64_t Gemma4Model::StepKey(const StepViews& sv, bool logits, const KvPool& pool, const Activations& act) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint64_t>(sv.T));
  mix(static_cast<uint64_t>(sv.S));
  mix(static_cast<uint64_t>(sv.R));
  mix(logits ? 1 : 0);
  mix(static_cast<uint64_t>(sv.rows.max_kv_len));  // already a power of two
  for (int grp = 0; grp < kNumKvGroups; ++grp) mix(static_cast<uint64_t>(sv.tables[grp].table_stride));
  mix(reinterpret_cast<uintptr_t>(&pool));
  mix(reinterpret_cast<uintptr_t>(&act));
  mix(reinterpret_cast<uintptr_t>(act.x.data));
  return h;
}

StatusOr<std::vector<float>> Gemma4Model::PerLayerInputs(const std::vector<int32_t>& ids) {
  if (!config_.has_ple() || ids.empty()) return std::vector<float>();
  for (int32_t id : ids)
    if (id < 0 || id >= config_.vocab_size) return InvalidArgument("[model] token id out of vocabulary");
  ActivationLimits limits;
  limits.max_rows = static_cast<int64_t>(ids.size());
  limits.max_seqs = 1;
  limits.max_outputs = 1;
  limits.max_table_width = 1;
  G4_ASSIGN_OR_RETURN(Activations act, Activations::Create(config_, *backend_, limits, 1));
  StepViews sv;
  sv.T = static_cast<int64_t>(ids.size());
  sv.x = Activations::Flat(act.x, sv.T, config_.hidden_size);
  backend_->CopyToDevice(act.token_ids, ids.data(), ids.size() * sizeof(int32_t));
  backend_->ops().Embed(weights_->embed_tokens, act.token_ids, embed_scale_, sv.x);
  ComputePle(sv, act);
  const int64_t NP = static_cast<int64_t>(config_.num_hidden_layers) * config_.hidden_size_per_layer_input;
  std::vector<float> out(sv.T * NP);
  backend_->CopyToHost(out.data(), act.ple.data, out.size() * sizeof(float));
  backend_->Sync();
  return out;
}

void Gemma4Model::Upload(const StepBatch& step, const KvPool& pool, Activations& act, StepViews& sv) const {
  Backend& b = *backend_;
  sv.T = step.num_rows();
  sv.S = step.num_seqs();
  sv.R = step.num_outputs();
  auto up = [&](int32_t* dst, const std::vector<int32_t>& src) {
    if (!src.empty()) b.CopyToDevice(dst, src.data(), src.size() * sizeof(int32_t));
  };
  up(act.token_ids, step.token_ids);
  up(act.positions, step.positions);
  up(act.row_seq, step.row_seq);
  up(act.query_start, step.query_start);
  up(act.kv_len, step.kv_len);
  up(act.output_rows, step.output_rows);

  sv.rows.num_rows = sv.T;
  sv.rows.num_seqs = sv.S;
  sv.rows.positions = act.positions;
  sv.rows.row_seq = act.row_seq;
  sv.rows.query_start = act.query_start;
  sv.rows.kv_len = act.kv_len;
  for (int64_t s = 0; s < sv.S; ++s) {
    sv.rows.max_query_rows = std::max<int64_t>(sv.rows.max_query_rows, step.query_start[s + 1] - step.query_start[s]);
    sv.rows.max_kv_len = std::max<int64_t>(sv.rows.max_kv_len, step.kv_len[s]);
  }
  // Host bounds are upper bounds (step.h): rounded up to a power of two, so
  // steps that differ only within a bucket launch the same shapes.
  sv.rows.max_kv_len = std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(sv.rows.max_kv_len, 1)));

  const int64_t area = act.limits().max_seqs * act.limits().max_table_width;
  for (int grp = 0; grp < kNumKvGroups; ++grp) {
    const KvGroup group = static_cast<KvGroup>(grp);
    // A power of two (-1 padded) for the same reason.
    const int64_t width = std::min<int64_t>(act.limits().max_table_width,
                                            std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(
                                                1, pool.TableWidth(step.seqs, group)))));
    int32_t* host_table = act.host_table().data() + grp * area;
    uint8_t* host_store = act.host_store().data() + grp * act.limits().max_seqs;
    pool.FillTables(step.seqs, group, host_table, width, host_store);
    b.CopyToDevice(act.block_table[grp], host_table, sv.S * width * sizeof(int32_t));
    b.CopyToDevice(act.seq_store[grp], host_store, sv.S);
    sv.tables[grp] = KvStepTables{act.block_table[grp], width, act.seq_store[grp]};
  }

  const int64_t H = config_.hidden_size;
  sv.x = Activations::Flat(act.x, sv.T, H);
  sv.a = Activations::Flat(act.a, sv.T, H);
  sv.o = Activations::Flat(act.o, sv.T, H);
  sv.d = Activations::Flat(act.d, sv.T, H);
  sv.d2 = Activations::Flat(act.d2, sv.T, H);
}

// Per-layer inputs, once per step (spec 3.3): ple = [T, N*P].
void Gemma4Model::ComputePle(const StepViews& sv, Activations& act) {
  const Gemma4Config& c = config_;
  Ops& ops = backend_->ops();
  const int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input, N = c.num_hidden_layers;
  const TensorView ple = Activations::Flat(act.ple, sv.T, N * P);
  const TensorView tok = Activations::Flat(act.ple_tok, sv.T, N * P);
  ops.MatMul(sv.x, weights_->per_layer_model_projection, ple);
  ops.Scale(ple, 1.0f / std::sqrt(static_cast<float>(H)));
  const TensorView per_layer = ple.Reshape(sv.T * N, P);
  ops.RmsNorm(per_layer, weights_->per_layer_projection_norm, static_cast<float>(c.rms_norm_eps), per_layer);
  ops.Embed(weights_->embed_tokens_per_layer, act.token_ids, std::sqrt(static_cast<float>(P)), tok);
  ops.Add(ple, tok, ple);
  ops.Scale(ple, 1.0f / std::sqrt(2.0f));
}

void Gemma4Model::AttentionBlock(int l, const StepViews& sv, const KvPool& pool, Activations& act) {
  const Gemma4Config& c = config_;
  const LayerGeometry& g = c.layers[l];
  const LayerWeights& lw = weights_->layers[l];
  Ops& ops = backend_->ops();
  const int64_t T = sv.T, D = g.head_dim, nH = c.num_attention_heads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float* inv_freq =
      g.type == AttentionType::kFull ? inv_freq_full_.as<const float>() : inv_freq_sliding_.as<const float>();
  const KvGroup group = pool.group_of_layer(l);
  const PagedKv kv = pool.LayerKv(l, sv.tables[static_cast<int>(group)]);
  const int64_t nKV = kv.store[0].format.num_kv_heads;

  // sv.a holds RmsNorm(x, input_layernorm): the previous AddNorm's.
  const TensorView q = Activations::Flat(act.q, T, nH * D);
  const TensorView k = Activations::Flat(act.k, T, nKV * D);
  const TensorView v = Activations::Flat(act.v, T, nKV * D);
  if (g.kv_shared) {  // a shared layer reads its donor's K/V, written earlier in this step
    ops.MatMul(sv.a, lw.q_proj, q);
  } else if (g.k_eq_v) {
    const WeightMatrix* ws[] = {&lw.q_proj, &lw.k_proj};
    const TensorView ys[] = {q, k};
    ops.MatMuls(sv.a, ws, ys);
    ops.Copy(k, v);  // V reads the raw K projection
  } else {
    const WeightMatrix* ws[] = {&lw.q_proj, &lw.k_proj, &lw.v_proj};
    const TensorView ys[] = {q, k, v};
    ops.MatMuls(sv.a, ws, ys);
  }
  HeadNormRopeArgs hn;  // q and k: head norm, then RoPE; v: unscaled head norm
  hn.q = q;
  hn.q_heads = static_cast<int>(nH);
  hn.q_weight = lw.q_norm;
  if (!g.kv_shared) {
    hn.k = k;
    hn.v = v;
  }
  hn.kv_heads = static_cast<int>(nKV);
  hn.k_weight = lw.k_norm;
  hn.head_dim = static_cast<int>(D);
  hn.positions = act.positions;
  hn.inv_freq = inv_freq;
  hn.eps = eps;
  ops.HeadNormRope(hn);
  if (!g.kv_shared) ops.KvWrite(sv.rows, kv, k, v);

  PagedAttentionArgs args;
  args.rows = sv.rows;
  args.kv = kv;
  args.q = q;
  args.out = Activations::Flat(act.attn, T, nH * D);
  args.num_heads = static_cast<int>(nH);
  args.num_kv_heads = static_cast<int>(nKV);
  args.head_dim = static_cast<int>(D);
  args.window = g.type == AttentionType::kSliding ? c.sliding_window : 0;
  args.scale = 1.0f;
  args.next_product = &lw.o_proj;
  ops.PagedAttention(args);

  ops.MatMul(args.out, lw.o_proj, sv.o);
  // x += norm(o); a = the feed-forward block's input norm, whose first op
  // is the gate/up product.
  ResidualUpdate(sv, sv.o, lw.post_attention_layernorm, 1.0f, true, lw.pre_feedforward_layernorm, &lw.gate_proj);
}

void Gemma4Model::ResidualUpdate(const StepViews& sv, const TensorView& o, const float* post_weight, float scale,
                                 bool next, const float* next_weight, const WeightMatrix* product,
                                 bool product_of_x) {
  AddNormArgs an;
  an.x = sv.x;
  an.o = o;
  an.post_weight = post_weight;
  an.scale = scale;
  if (next) {
    an.next_out = sv.a;
    an.next_weight = next_weight;
  }
  an.eps = static_cast<float>(config_.rms_norm_eps);
  an.next_product = product;
  an.product_of_x = product_of_x;
  backend_->ops().AddNorm(an);
}

void Gemma4Model::EndLayer(int l, const StepViews& sv, const TensorView& o, const float* post_weight) {
  const bool last = l + 1 == config_.num_hidden_layers;
  // The next layer's attention block starts with its q (and k, v) product.
  ResidualUpdate(sv, o, post_weight, weights_->layers[l].layer_scalar, !last,
                 last ? nullptr : weights_->layers[l + 1].input_layernorm,
                 last ? nullptr : &weights_->layers[l + 1].q_proj);
}

void Gemma4Model::FeedForwardBlock(int l, const StepViews& sv, Activations& act) {
  const Gemma4Config& c = config_;
  const LayerWeights& lw = weights_->layers[l];
  Ops& ops = backend_->ops();
  const int64_t T = sv.T, H = c.hidden_size, W = c.layers[l].mlp_width;
  const float eps = static_cast<float>(c.rms_norm_eps);

  // Dense MLP: d = down(gelu(gate(a)) * up(a)); sv.a holds the
  // pre-feed-forward norm (the attention block's AddNorm).
  const TensorView gv = Activations::Flat(act.g, T, W);
  const TensorView uv = Activations::Flat(act.u, T, W);
  {
    const WeightMatrix* ws[] = {&lw.gate_proj, &lw.up_proj};
    const TensorView ys[] = {gv, uv};
    ops.MatMuls(sv.a, ws, ys);
  }
  ops.GatedMatMul(gv, uv, lw.down_proj, sv.d);
  if (!c.enable_moe_block) {
    EndFeedForward(l, sv, sv.d, lw.post_feedforward_layernorm);
    return;
  }
  ops.RmsNorm(sv.d, lw.post_feedforward_layernorm_1, eps, sv.d);

  // Router (spec 3.5): unscaled norm of the residual, x router.scale x H^-1/2.
  const int E = c.num_experts, K = c.top_k_experts;
  ops.RmsNorm(sv.x, nullptr, eps, sv.a);
  ops.ScaleColumns(sv.a, lw.router_scale, 1.0f / std::sqrt(static_cast<float>(H)), sv.a);
  const TensorView router = Activations::Flat(act.router, T, E);
  const TensorView ids = Activations::Flat(act.expert_ids, T, K);
  const TensorView weights = Activations::Flat(act.expert_weights, T, K);
  ops.MatMul(sv.a, lw.router_proj, router);
  ops.MoeRoute(router, K, lw.per_expert_scale, ids, weights);

  // Experts read their own pre-norm of the residual.
  ops.RmsNorm(sv.x, lw.pre_feedforward_layernorm_2, eps, sv.a);
  MoeExpertsArgs moe;
  moe.x = sv.a;
  moe.ids = ids;
  moe.weights = weights;
  moe.gate = lw.expert_gate;
  moe.up = lw.expert_up;
  moe.down = lw.expert_down;
  moe.out = sv.d2;
  moe.workspace = act.moe_workspace;
  ops.MoeExperts(moe);
  ops.RmsNorm(sv.d2, lw.post_feedforward_layernorm_2, eps, sv.d2);
  ops.Add(sv.d, sv.d2, sv.d);
  EndFeedForward(l, sv, sv.d, lw.post_feedforward_layernorm);
}

void Gemma4Model::EndFeedForward(int l, const StepViews& sv, const TensorView& d, const float* post_weight) {
  if (config_.has_ple()) {  // the per-layer-input block ends the layer, starting with x's gate product
    ResidualUpdate(sv, d, post_weight, 1.0f, false, nullptr, &weights_->layers[l].per_layer_input_gate, true);
  } else {
    EndLayer(l, sv, d, post_weight);
  }
}

void Gemma4Model::PleBlock(int l, const StepViews& sv, Activations& act) {
  const Gemma4Config& c = config_;
  const LayerWeights& lw = weights_->layers[l];
  Ops& ops = backend_->ops();
  const int64_t T = sv.T, P = c.hidden_size_per_layer_input, N = c.num_hidden_layers;
  const TensorView z = Activations::Flat(act.g, T, P);
  // Layer l's slice of the per-layer inputs: a strided view, no copy.
  const TensorView pli = Activations::Flat(act.ple, T, N * P).Cols(l * P, P);
  ops.MatMul(sv.x, lw.per_layer_input_gate, z);
  ops.GatedMatMul(z, pli, lw.per_layer_projection, sv.o);
  EndLayer(l, sv, sv.o, lw.post_per_layer_input_norm);
}

void Gemma4Model::Head(const StepViews& sv, bool logits, Activations& act) {
  const Gemma4Config& c = config_;
  Ops& ops = backend_->ops();
  const TensorView hidden = Activations::Flat(act.hidden_out, sv.R, c.hidden_size);
  ops.GatherRows(sv.x, act.output_rows, hidden);
  ops.RmsNorm(hidden, weights_->final_norm, static_cast<float>(c.rms_norm_eps), hidden);
  if (!logits) return;
  const TensorView out = Activations::Flat(act.logits, sv.R, c.vocab_size);
  const WeightMatrix& head = weights_->lm_head.rows ? weights_->lm_head : weights_->embed_tokens;  // untied or tied
  ops.MatMul(hidden, head, out);
  if (c.final_logit_softcapping > 0) ops.Softcap(out, static_cast<float>(c.final_logit_softcapping));
}

}  // namespace g4
