// Host entry points of the CUDA kernels (the .cu files), called by CudaOps
// (cuda_ops.cc) after it has checked shapes and formats. Each queues work on
// `stream` and returns at once; none synchronizes unless it says so.
// Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/ops.h"
#include "backend/tensor.h"
#include "io/weight_matrix.h"

namespace g4::cuda {

// Device scratch the kernels borrow between calls (owned by CudaOps): slot
// `slot` holds at least `bytes`, contents unspecified, except kCounters:
// zeros when (re)allocated, and every kernel that counts in it leaves it
// zeros when it ends. Growing a slot waits for the stream first (the old
// buffer may be in use). Valid until the next Get of the same slot.
class Scratch {
 public:
  enum Slot : int { kMoe, kAttention, kRecode, kQuant, kSample, kCounters, kNumSlots };
  virtual ~Scratch() = default;
  virtual void* Get(Slot slot, size_t bytes) = 0;
};

// matmul.cu: y = x W^T (ops.h MatMul): affine weights in the integer scheme of
// affine_int8.cuh, dense ones in the canonical order of matmul_core.cuh.
// x_quantized: scratch kQuant already holds x quantized for w's format
// (by the op before: AddNorm or PagedAttention), so affine weights skip
// QuantizeRows.
void MatMul(const TensorView& x, const WeightMatrix& w, const TensorView& y, Scratch& scratch, cudaStream_t stream,
            bool x_quantized = false);
// ops.h MatMuls: affine weights of one format share one quantization of x
// (none with x_quantized, for ws[0]'s format) and one launch; anything else
// is MatMul per product.
void MatMuls(const TensorView& x, std::span<const WeightMatrix* const> ws, std::span<const TensorView> ys,
             Scratch& scratch, cudaStream_t stream, bool x_quantized = false);
// ops.h GatedMatMul: affine weights quantize gelu_tanh(g) * u as they
// read it (g untouched); anything else is GeluMul into g, then MatMul.
void GatedMatMul(const TensorView& g, const TensorView& u, const WeightMatrix& w, const TensorView& y,
                 Scratch& scratch, cudaStream_t stream);
// Whether the kernels take this weight format (dense F32/BF16/F16 or affine
// 2/3/4/5/6/8-bit, groups of 32/64/128, BF16/F16/F32 scales).
bool SupportedWeight(const WeightMatrix& w);

// embed.cu
void Embed(const WeightMatrix& table, const int32_t* ids, float scale, const TensorView& out, cudaStream_t stream);

// norm.cu / rope.cu
void RmsNorm(const TensorView& x, const float* weight, float eps, const TensorView& y, cudaStream_t stream);
// With args.next_product affine and as wide as x, AddNorm also quantizes
// the product's input (next_out, or x) into scratch kQuant as MatMul would,
// and returns true.
bool AddNorm(const AddNormArgs& args, Scratch& scratch, cudaStream_t stream);
void Rope(const TensorView& x, int heads, int head_dim, const int32_t* positions, const float* inv_freq,
          cudaStream_t stream);
// head_norm_rope.cu
void HeadNormRope(const HeadNormRopeArgs& args, cudaStream_t stream);

// elementwise.cu: F32 views of one shape, any strides.
void GeluMul(const TensorView& g, const TensorView& u, const TensorView& out, cudaStream_t stream);
void Add(const TensorView& a, const TensorView& b, const TensorView& y, cudaStream_t stream);
void Scale(const TensorView& x, float s, cudaStream_t stream);
void ScaleColumns(const TensorView& x, const float* col, float s, const TensorView& y, cudaStream_t stream);
void Softcap(const TensorView& x, float cap, cudaStream_t stream);
void GatherRows(const TensorView& src, const int32_t* rows, const TensorView& dst, cudaStream_t stream);

// moe.cu
void MoeRoute(const TensorView& logits, int top_k, const float* per_expert_scale, const TensorView& ids,
              const TensorView& weights, cudaStream_t stream);
void MoeExperts(const MoeExpertsArgs& args, Scratch& scratch, cudaStream_t stream);

// kv_write.cu
void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v, cudaStream_t stream);
// Block lists are device arrays of n entries.
void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size, const int32_t* from_blocks,
                    const int32_t* to_blocks, const int32_t* tokens, int64_t n, cudaStream_t stream);

// paged_attention.cu
// With args.next_product affine and as wide as out, and a merge that
// writes every row (plain stores), the merge also quantizes out for that
// product into scratch kQuant as MatMul would, and it returns true.
bool PagedAttention(const PagedAttentionArgs& args, Scratch& scratch, cudaStream_t stream);

// sample.cu: steps 1-4, argmax and logprobs of the rows whose parameters
// make them greedy; other rows are left untouched for the host (cuda_ops.cc).
void SampleGreedyRows(const SampleArgs& args, Scratch& scratch, cudaStream_t stream);

}  // namespace g4::cuda
