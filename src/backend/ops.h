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
};

std::unique_ptr<Ops> MakeCpuOps();

}  // namespace g4
