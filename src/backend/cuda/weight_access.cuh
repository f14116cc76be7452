// Device-side reading of a WeightMatrix (io/weight_matrix.h) as placed by
// CudaBackend::PlaceWeights: dense F32 / BF16 / F16 rows, or MLX affine codes
// (LSB-first in u32 words, a row one bit stream) with per-group scales and
// biases. Columns are read in chunks of 32 (every affine group size is a
// multiple of 32, so a chunk of a B-bit row is exactly B whole words and
// lies in one group).
//
// Dense elements convert exactly; affine codes are read as words
// (affine_int8.cu multiplies them as integers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/device_common.cuh"

namespace g4::cuda {

// Weight formats the kernels are instantiated for.
enum WFmt : int { kWF32 = 0, kWBF16, kWF16, kWA2, kWA3, kWA4, kWA5, kWA6, kWA8, kNumWFmt };

constexpr int AffineBits(int fmt) {
  return fmt == kWA2 ? 2 : fmt == kWA3 ? 3 : fmt == kWA4 ? 4 : fmt == kWA5 ? 5 : fmt == kWA6 ? 6 : fmt == kWA8 ? 8 : 0;
}
constexpr bool IsAffine(int fmt) { return AffineBits(fmt) != 0; }
constexpr int DenseBytes(int fmt) { return fmt == kWF32 ? 4 : 2; }

// Scale dtypes of affine weights.
enum ScaleType : int { kSF32 = 0, kSBF16 = 1, kSF16 = 2 };

// A weight matrix as kernels take it (by value).
struct DevWeight {
  const void* data = nullptr;    // dense elements or affine codes
  const void* scales = nullptr;  // affine
  const void* biases = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t row_bytes = 0;  // bytes per row of `data`
  int64_t groups_per_row = 0;
  int group = 0;
  int scale_type = kSBF16;
  bool vec16 = false;  // `data` and row_bytes are 16-byte aligned: rows may be read in 16-byte pieces
};

__device__ __forceinline__ float LoadScale(int type, const void* base, int64_t i) {
  if (type == kSBF16) return Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
  if (type == kSF16) return F16ToF32(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

// The B code words at p (a chunk's start), in 16-byte pieces when vec16
// (p 16-byte aligned).
template <int B>
__device__ __forceinline__ void LoadCodeWords(const uint8_t* p, bool vec16, uint32_t (&out)[B]) {
  if constexpr (B == 4) {
    if (vec16) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
      out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
      return;
    }
  } else if constexpr (B == 8) {
    if (vec16) {
      const uint4 v0 = __ldg(reinterpret_cast<const uint4*>(p)), v1 = __ldg(reinterpret_cast<const uint4*>(p) + 1);
      out[0] = v0.x, out[1] = v0.y, out[2] = v0.z, out[3] = v0.w;
      out[4] = v1.x, out[5] = v1.y, out[6] = v1.z, out[7] = v1.w;
      return;
    }
  }
  const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
#pragma unroll
  for (int i = 0; i < B; ++i) out[i] = __ldg(q + i);
}

// The B words of chunk `c` of affine row `row` (aligned loads).
template <int B>
__device__ __forceinline__ void LoadChunkWords(const DevWeight& w, int64_t row, int64_t c, uint32_t (&out)[B]) {
  LoadCodeWords<B>(static_cast<const uint8_t*>(w.data) + row * w.row_bytes + c * (4 * B), w.vec16, out);
}

// Columns [32c, 32c + n) of dense row `row` as float32 into out[0..n) (n <=
// 32; n < 32 only for the row's last chunk).
template <int FMT>
__device__ __forceinline__ void DecodeChunk(const DevWeight& w, int64_t row, int64_t c, int n, float* out) {
  static_assert(!IsAffine(FMT), "affine weights take affine_int8.cuh");
  const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * w.row_bytes + c * 32 * DenseBytes(FMT);
  if (n == 32 && w.vec16) {
    if constexpr (FMT == kWF32) {
#pragma unroll
      for (int v = 0; v < 8; ++v) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(p) + v);
        out[4 * v] = f.x, out[4 * v + 1] = f.y, out[4 * v + 2] = f.z, out[4 * v + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(p) + v);
        const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint16_t lo = static_cast<uint16_t>(words[i] & 0xffffu), hi = static_cast<uint16_t>(words[i] >> 16);
          out[8 * v + 2 * i] = FMT == kWBF16 ? Bf16ToF32(lo) : F16ToF32(lo);
          out[8 * v + 2 * i + 1] = FMT == kWBF16 ? Bf16ToF32(hi) : F16ToF32(hi);
        }
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    out[i] = 0.0f;
    if (i < n) {
      if constexpr (FMT == kWF32) {
        out[i] = __ldg(reinterpret_cast<const float*>(p) + i);
      } else {
        const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(p) + i);
        out[i] = FMT == kWBF16 ? Bf16ToF32(h) : F16ToF32(h);
      }
    }
  }
}

}  // namespace g4::cuda
