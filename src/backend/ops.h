// Ops: everything the Gemma 4 graph computes with, over one step's rows
// (tokens of several sequences, grouped by sequence; step.h). Every op is
// pure virtual: a backend implements all of them, so a device backend can
// never fall back to host code by omission.
//
// Conventions:
//  - Activations are F32 TensorViews in the backend's memory space; ids,
//    positions and tables are int32 device arrays. Views may be strided
//    (tensor.h) unless an op says otherwise.
//  - An output may alias an input only where the op says so.
//  - Weights are WeightMatrix views placed by Backend::PlaceWeights; weight
//    vectors (norms, scales) are device pointers from the same placement.
//  - Row independence (the batching contract): every output row is a
//    function of its own input row (and, for attention, its own sequence's
//    keys) computed in one fixed order, whatever the number of rows, their
//    order or their neighbours. A sequence's result is therefore bitwise the
//    same alone or in any step; tests/backend checks it for every op.
//
// Threading: called by the one thread that drives the backend.
#pragma once

#include <cstdint>
#include <span>

#include "backend/kv_record.h"
#include "backend/step.h"
#include "backend/tensor.h"
#include "io/weight_matrix.h"

namespace g4 {

// One layer's KV in one block store: `num_blocks` blocks of `block_size`
// records (kv_record.h), block b's slot i at records + (b * block_size + i)
// * format.record_bytes. Block 0 is never handed to a sequence (padding rows
// may point at it).
struct PagedKvStore {
  KvRecordFormat format;
  uint8_t* records = nullptr;
  int64_t num_blocks = 0;
  const float* value_centroids = nullptr;  // turbo: [2^value_bits], device
  const float* value_signs = nullptr;      // turbo: [head_dim], device
};

// Where each sequence of the step keeps one layer's K/V. Token p of
// sequence s lives in block tables.block_table[s * table_stride + p /
// block_size], slot p % block_size, of store[seq_store[s]] (a sequence
// waiting for a delayed precision change lives in store 0, plain; once
// converted, in store 1). Blocks wholly outside a sliding window may be -1.
struct PagedKv {
  PagedKvStore store[2];
  KvStepTables tables;
  int block_size = 0;
};

// Scaled dot-product attention of every row over its own sequence's keys,
// GQA (query head h reads KV head h / (num_heads / num_kv_heads)): row r at
// position p of sequence s sees keys 0..p of s, or only those > p - window
// when window > 0. The keys of this step must already be written
// (KvWrite). Output in the original value domain (a rotating codec's
// inverse rotation is applied once per output row, not per key).
//
// Order: each (row, head) reduces over its visible keys in ascending
// position with online softmax, split into fixed ranges of visible keys
// merged by log-sum-exp in range order; tiles and ranges depend only on the
// row's visible-key count, never on the step. The result is bitwise the
// same for a row whatever else runs, and chunked prefill equals decode.
struct PagedAttentionArgs {
  StepRows rows;
  PagedKv kv;
  TensorView q;    // [T, num_heads * head_dim]
  TensorView out;  // [T, num_heads * head_dim]; may not alias q
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int window = 0;  // 0 = causal only
  float scale = 1.0f;
  // A hint that never changes a result, as AddNormArgs::next_product: the
  // weights the op right after this one multiplies out by.
  const WeightMatrix* next_product = nullptr;
};

// The routed experts of a MoE block for every row:
//   out[t] = sum over j in ascending expert order of
//            weights[t, j] * down_e(gelu_tanh(gate_e(x[t])) * up_e(x[t])),
//   e = ids[t, j], accumulated into a zeroed row in that order, one fused
//   multiply-add per term and element: out = fma(weights[t, j], y_e, out)
//   (equal expert ids in a row: ascending j).
struct MoeExpertsArgs {
  TensorView x;        // [T, H]
  TensorView ids;      // I32 [T, k]
  TensorView weights;  // F32 [T, k]
  std::span<const WeightMatrix> gate, up, down;  // [E] each: [Ie, H], [Ie, H], [H, Ie]
  TensorView out;      // [T, H]; may not alias x
  TensorView workspace;  // U8 [1, MoeWorkspaceBytes(T, k, H, Ie)]
};
size_t MoeWorkspaceBytes(int64_t rows, int top_k, int64_t hidden, int64_t expert_width);

// The end of a residual sub-block, fused:
//   x = (x + RmsNorm(o, post_weight)) * scale;
//   then, when next_out has data, next_out = RmsNorm(x, next_weight)
// bitwise what RmsNorm(o, post_weight, eps, o), Add(x, o, x), Scale(x,
// scale) and RmsNorm(x, next_weight, eps, next_out) give on the same
// backend. o's contents afterwards are unspecified (a backend may normalize
// it in place). x, o and next_out may not alias; all are [T, H].
//
// next_product is a hint that never changes a result: the weights the op
// right after this one multiplies next_out by (or x, with product_of_x) as
// its input, a MatMul, or a MatMuls whose first weights these are. A backend
// may prepare that product's input here (CUDA: its int8 quantization, so
// the product does not launch one). Any other op in between voids it.
struct AddNormArgs {
  TensorView x;
  TensorView o;
  const float* post_weight = nullptr;  // [H], device; null: unscaled
  float scale = 1.0f;
  TensorView next_out;                 // optional
  const float* next_weight = nullptr;  // [H], device; null: unscaled
  float eps = 1e-6f;
  const WeightMatrix* next_product = nullptr;  // optional
  bool product_of_x = false;                   // next_product reads x, not next_out
};

// The attention inputs' per-head norms and RoPE, in place, each view
// contiguous [T, heads * head_dim], head h of row t at h * head_dim:
//   q: RmsNorm of each head with q_weight, then Rope;
//   k: the same with k_weight (skipped when k has no data);
//   v: RmsNorm of each head, unscaled (skipped when v has no data),
// bitwise what those separate ops give on the same backend. q, k and v may
// not overlap.
struct HeadNormRopeArgs {
  TensorView q;
  int q_heads = 0;
  const float* q_weight = nullptr;  // [head_dim], device
  TensorView k;
  TensorView v;
  int kv_heads = 0;
  const float* k_weight = nullptr;  // [head_dim], device
  int head_dim = 0;
  const int32_t* positions = nullptr;  // [T], device
  const float* inv_freq = nullptr;     // [head_dim / 2], device
  float eps = 1e-6f;
};

// At most this many products share one MatMuls call.
constexpr int kMaxSharedInputProducts = 4;

// Sampling parameters of one row (the reference chain: backend/sampler.h).
// Plain data so a device can read an array of them. Index ranges point into
// the arrays of SampleArgs.
struct SampleRowParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  float min_p = 0.0f;
  float xtc_probability = 0.0f;
  float xtc_threshold = 0.1f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;
  int32_t repetition_context = 20;  // penalty windows over the row's history; 0 = all of it
  int32_t presence_context = 20;
  int32_t frequency_context = 20;
  int32_t bias_begin = 0, bias_count = 0;      // logit_bias entries
  int32_t exempt_begin = 0, exempt_count = 0;  // XTC-exempt ids
  int32_t history_begin = 0, history_count = 0;  // context tokens, oldest first
  uint64_t seed = 0;
  uint64_t step = 0;  // tokens this sequence has sampled before: random draws depend on (seed, step) only
};

// What SampleRows writes for a row whose logits hold a NaN (a broken model:
// NaN weights, an overflow): no token is drawn from such a row.
constexpr int32_t kNonFiniteLogits = -1;

struct SampleArgs {
  TensorView logits;  // [R, V]; steps 1-4 of the chain are applied in place
  const SampleRowParams* params = nullptr;  // [R], device
  // Optional: the same R rows' parameters in host memory (what was uploaded
  // to `params`), so a device backend need not read them back, a wait for
  // the step's kernels, before it launches its sampling.
  std::span<const SampleRowParams> host_params;
  const int32_t* bias_ids = nullptr;        // device arrays indexed by the ranges above
  const float* bias_values = nullptr;
  const int32_t* exempt_ids = nullptr;
  const int32_t* history = nullptr;
  TensorView out_ids;  // I32 [R, 1]
  // Optional (top_logprobs >= 0 and both set): per row the chosen token's
  // log-probability then the top_logprobs best (ids descending, ties lower id
  // first), full-vocabulary log-softmax after steps 1-4. Columns beyond the
  // vocabulary size hold id -1 and -inf.
  int top_logprobs = -1;
  TensorView logprob_ids;     // I32 [R, 1 + top_logprobs]
  TensorView logprob_values;  // F32 [R, 1 + top_logprobs]
};

class Ops {
 public:
  virtual ~Ops() = default;

  // y[m, n] = sum_k x[m, k] W[n, k]: x [M, W.cols], y [M, W.rows], any M.
  // Row-invariant (kernels' canonical order): row m of y depends only on
  // row m of x.
  virtual void MatMul(const TensorView& x, const WeightMatrix& w, const TensorView& y) = 0;
  // ys[i] = x ws[i]^T for each i (1 to kMaxSharedInputProducts products of
  // one input), each bitwise what MatMul(x, *ws[i], ys[i]) gives; a backend
  // may compute them together (one quantization of x, one launch). No y
  // may alias x or another y.
  virtual void MatMuls(const TensorView& x, std::span<const WeightMatrix* const> ws,
                       std::span<const TensorView> ys) = 0;
  // y = (gelu_tanh(g) * u) W^T, bitwise GeluMul(g, u, g) then MatMul(g,
  // w, y) on the same backend; g's contents afterwards are unspecified (a
  // backend may store the product there). g and u [M, W.cols]; y may not
  // alias g or u.
  virtual void GatedMatMul(const TensorView& g, const TensorView& u, const WeightMatrix& w, const TensorView& y) = 0;
  // out[i, :] = table[ids[i], :] * scale. ids: int32 [out.rows], in range.
  virtual void Embed(const WeightMatrix& table, const int32_t* ids, float scale, const TensorView& out) = 0;
  // Per row: y = x (mean(x^2) + eps)^-1/2 * weight (weight null: unscaled;
  // else [x.cols], device). y may alias x.
  virtual void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y) = 0;
  // Rotate-half RoPE in place on x [T, heads * head_dim]: row t at
  // positions[t], pair (i, i + head_dim / 2) rotated by positions[t] *
  // inv_freq[i] (inv_freq [head_dim / 2], device; zero entries leave a pair
  // unrotated).
  virtual void Rope(const TensorView& x, int heads, int head_dim, const int32_t* positions,
                    const float* inv_freq) = 0;
  // out = gelu_tanh(g) * u, elementwise; out may alias g or u.
  virtual void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out) = 0;
  // y = a + b; y may alias a or b.
  virtual void Add(const TensorView& a, const TensorView& b, const TensorView& y) = 0;
  // AddNormArgs: a residual update and the next norm in one op.
  virtual void AddNorm(const AddNormArgs& args) = 0;
  // HeadNormRopeArgs: q, k and v's head norms and RoPE in one op.
  virtual void HeadNormRope(const HeadNormRopeArgs& args) = 0;
  // x *= s, in place.
  virtual void Scale(const TensorView& x, float s) = 0;
  // y[i, j] = x[i, j] * col[j] * s (col [x.cols], device); y may alias x.
  virtual void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y) = 0;
  // x = cap * tanh(x / cap), in place.
  virtual void Softcap(const TensorView& x, float cap) = 0;
  // dst = src (same shape and dtype; no overlap).
  virtual void Copy(const TensorView& src, const TensorView& dst) = 0;
  // dst[i, :] = src[rows[i], :] for i < dst.rows (rows: int32, device).
  virtual void GatherRows(const TensorView& src, const int32_t* rows, const TensorView& dst) = 0;

  // MoE routing per row (backend/moe_route.h): softmax over the E
  // logits, the top_k largest (ties: lower index), renormalized over those,
  // times per_expert_scale[e] (device, [E]). ids I32 [T, k] by descending
  // probability; weights F32 [T, k].
  virtual void MoeRoute(const TensorView& logits, int top_k, const float* per_expert_scale,
                        const TensorView& ids, const TensorView& weights) = 0;
  virtual void MoeExperts(const MoeExpertsArgs& args) = 0;

  // Encodes row t's K and V (k, v: [T, num_kv_heads * head_dim]) into its
  // sequence's slot for position positions[t] (PagedKv), in the format of
  // the sequence's store. Never touches other slots.
  virtual void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v) = 0;
  virtual void PagedAttention(const PagedAttentionArgs& args) = 0;
  // Re-encodes whole blocks between stores of one layer (a delayed
  // precision change): block to_blocks[i] of `to` <- the first tokens[i]
  // records of block from_blocks[i] of `from`, decoded and encoded again.
  // Block ids are host arrays.
  virtual void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                              std::span<const int32_t> from_blocks, std::span<const int32_t> to_blocks,
                              std::span<const int32_t> tokens) = 0;

  // The sampling chain on every row of args.logits (backend/sampler.h is
  // the reference it must match token for token); a row with a NaN logit
  // gets kNonFiniteLogits.
  virtual void SampleRows(const SampleArgs& args) = 0;
};

}  // namespace g4
