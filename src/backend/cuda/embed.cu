// Embedding lookup: each output element decodes its table element (dense:
// exact; affine: fma(q, scale, bias), io's DequantizeRow value) and multiplies by
// the scale once, as the CPU backend does.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/matmul.cuh"
#include "backend/cuda/pdl.cuh"

namespace g4::cuda {
namespace {

__device__ __forceinline__ float TableValue(const DevWeight& w, int fmt, int64_t row, int64_t c) {
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + row * w.row_bytes;
  if (fmt == kWF32) return reinterpret_cast<const float*>(base)[c];
  if (fmt == kWBF16) return Bf16ToF32(reinterpret_cast<const uint16_t*>(base)[c]);
  if (fmt == kWF16) return F16ToF32(reinterpret_cast<const uint16_t*>(base)[c]);
  const int bits = AffineBits(fmt);
  const uint32_t* words = reinterpret_cast<const uint32_t*>(base);
  const int64_t bit = c * bits;
  const int sh = static_cast<int>(bit & 31);
  uint64_t v = words[bit >> 5] >> sh;
  if (sh + bits > 32) v |= static_cast<uint64_t>(words[(bit >> 5) + 1]) << (32 - sh);
  const float q = static_cast<float>(static_cast<uint32_t>(v) & ((1u << bits) - 1));
  const int64_t g = row * w.groups_per_row + c / w.group;
  return __fmaf_rn(q, LoadScale(w.scale_type, w.scales, g), LoadScale(w.scale_type, w.biases, g));
}

__global__ void EmbedKernel(DevWeight w, int fmt, const int32_t* __restrict__ ids, int64_t n, float scale,
                            float* out, int64_t ldo) {
  FollowPredecessor();  // launched as a dependent (pdl.cuh)
  const int64_t d = w.cols;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= n * d) return;
  const int64_t i = idx / d, c = idx % d;
  const int32_t id = ids[i];
  if (id < 0 || id >= w.rows) __trap();  // ops.h: ids in range
  out[i * ldo + c] = TableValue(w, fmt, id, c) * scale;
}

}  // namespace

void Embed(const WeightMatrix& table, const int32_t* ids, float scale, const TensorView& out,
           cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  const int64_t ldo = out.pitch();
  LaunchDependent(EmbedKernel, dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256), 0, stream,
                  MakeDevWeight(table), WeightFormat(table), ids, out.rows, scale, out.f32(), ldo);
  G4_CUDA_LAUNCHED();
}

}  // namespace g4::cuda
