// Ops: the one interface the Gemma 4 graph is written against. A backend
// (CPU now, CUDA later) implements every op; the model never includes a
// backend header. Activations are float32 row-major buffers in the backend's
// memory; weights are WeightMatrix views (dense or affine-packed).
//
// Threading: an Ops object is used by one thread at a time; implementations
// parallelize internally.
#pragma once

#include <cstdint>
#include <memory>

#include "io/weight_matrix.h"

namespace g4 {

// Scaled dot-product attention over one sequence with GQA, scale and masks
// given by positions: query i (at position q_pos[i]) sees key j iff
// k_pos[j] <= q_pos[i] and (window == 0 || k_pos[j] > q_pos[i] - window).
// Keys may be stored in any order (rings). Query head h reads KV head
// h / (num_heads / num_kv_heads).
struct AttentionArgs {
  const float* q = nullptr;        // [num_queries, num_heads, head_dim]
  const int32_t* q_pos = nullptr;  // [num_queries]
  int64_t num_queries = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  const float* k = nullptr;        // key j, head h at k + j * kv_stride + h * head_dim
  const float* v = nullptr;        // same layout as k
  const int32_t* k_pos = nullptr;  // [num_keys]
  int64_t num_keys = 0;
  int64_t kv_stride = 0;           // floats between consecutive keys (>= num_kv_heads * head_dim)
  int window = 0;                  // 0 = causal only
  float scale = 1.0f;
  float* out = nullptr;            // [num_queries, num_heads, head_dim]
};

// K/V kept by a KV cache as fixed-size per-token records (docs/kv-cache.md):
// key j's record starts at records + j * record_bytes and pos[j] is its
// absolute position (masks as in AttentionArgs). Records hold all KV heads;
// each plane below is [width] codes or [width / group] fp16 numbers, with
// head h's elements at [h * head_dim, (h + 1) * head_dim).
//
// Keys are visited in the order first, first + 1, ..., wrapping at num_keys
// (a ring passes its oldest slot, so the order is chronological), and the
// kernels reduce over the *visible* keys only, in that order: the result
// depends on which keys a query sees, never on masked neighbours or on where
// a layout keeps them, so a ring and an unbounded cache give bit-identical
// attention.
struct EncodedKv {
  const uint8_t* records = nullptr;
  int64_t record_bytes = 0;
  const int32_t* pos = nullptr;
  int64_t num_keys = 0;
  int64_t first = 0;
};

// kv:plain: float32 K and V rows at byte offsets k and v of a record.
struct PlainKvFormat {
  int64_t k = 0;
  int64_t v = 0;
};

// kv:affine: codes of `bits` bits packed LSB-first (backend/kv_formats.h), an
// fp16 scale and bias per group of group_size along head_dim: x = s q + b.
struct AffineKvFormat {
  int bits = 4;
  int group_size = 64;
  int64_t k_codes = 0, k_scales = 0, k_biases = 0;  // byte offsets in a record
  int64_t v_codes = 0, v_scales = 0, v_biases = 0;
};

// kv:turbo, groups of 32 along head_dim. Keys: int8 indices (key_bits 8) or
// unsigned indices packed LSB-first, with fp16 scale s and zero z:
// k = (i + z) s. Values: Lloyd-Max indices packed LSB-first with an fp16 RMS
// r: v_rot = value_centroids[i] r, in the rotated domain (see UnrotateValues).
struct TurboKvFormat {
  int key_bits = 8;
  int value_bits = 3;
  int64_t k_index = 0, k_scales = 0, k_zeros = 0;  // byte offsets in a record
  int64_t v_index = 0, v_scales = 0;
  const float* value_centroids = nullptr;  // [2^value_bits]
};

class Ops {
 public:
  virtual ~Ops() = default;

  // y[m, n] = sum_k x[m, k] * W[n, k]     x: [m_rows, W.cols], y: [m_rows, W.rows]
  virtual void MatMul(const float* x, int64_t m_rows, const WeightMatrix& w, float* y) = 0;
  // out[i, :] = table[ids[i], :] * scale       out: [n, table.cols]
  virtual void Embed(const WeightMatrix& table, const int32_t* ids, int64_t n, float scale,
                     float* out) = 0;
  // Per row of width d: y = x * (mean(x^2) + eps)^-1/2 * weight (weight null:
  // unscaled). y may alias x.
  virtual void RmsNorm(const float* x, int64_t rows, int64_t d, const float* weight, float eps,
                       float* y) = 0;
  // Rotate-half RoPE in place on x [tokens, heads, head_dim]: for slot i <
  // head_dim/2 with angle pos * inv_freq[i], pairs (i, i + head_dim/2) rotate.
  virtual void Rope(float* x, int64_t tokens, int heads, int head_dim, const int32_t* positions,
                    const float* inv_freq) = 0;
  virtual void Attention(const AttentionArgs& args) = 0;
  // out[i] = gelu_tanh(g[i]) * u[i]; out may alias g or u.
  virtual void GeluMul(const float* g, const float* u, int64_t n, float* out) = 0;
  // y[i] = a[i] + b[i]; y may alias a or b.
  virtual void Add(const float* a, const float* b, int64_t n, float* y) = 0;
  // x[i] *= s
  virtual void Scale(float* x, int64_t n, float s) = 0;
  // x[i] = cap * tanh(x[i] / cap)
  virtual void Softcap(float* x, int64_t n, float cap) = 0;

  // Attention over a KV cache's records (EncodedKv), computed on the stored
  // representation (packed codes are never expanded to a float cache). The
  // query side of `args` (q, q_pos, num_queries, heads, head_dim, window,
  // scale, out) is used; its k, v, k_pos, num_keys and kv_stride are
  // ignored. Not pure: the defaults are the host kernels
  // (backend/cpu/kv_attention_*.cc), which a device backend overrides.
  virtual void AttentionPlainKv(const AttentionArgs& args, const EncodedKv& kv, const PlainKvFormat& f);
  virtual void AttentionAffineKv(const AttentionArgs& args, const EncodedKv& kv, const AffineKvFormat& f);
  // As above; the output is left in the rotated value domain.
  virtual void AttentionTurboKv(const AttentionArgs& args, const EncodedKv& kv, const TurboKvFormat& f);
  // Undoes TurboQuant's value rotation on rows of head_dim floats, in place:
  // x <- signs . (H x) / sqrt(head_dim), H the Walsh-Hadamard matrix.
  virtual void UnrotateValues(float* x, int64_t rows, int head_dim, const float* signs);
};

std::unique_ptr<Ops> MakeCpuOps();

}  // namespace g4
