// Device pieces of the integer scheme (affine_int8.cuh) shared by its
// kernels (affine_int8.cu: quantization and the tiled kernel;
// affine_int8_row.cu: the one-row kernel), so that every path computes the
// same bits. Internal to backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_common.cuh"
#include "backend/cuda/dp4a.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/quantize_group.cuh"
#include "core/check.h"

namespace g4::cuda {

// 32 columns' codes (B words) as 8 words of 4 u8 codes each, in QPos order.
template <int B>
__device__ __forceinline__ void Unpack(const uint32_t (&wd)[B], uint32_t (&quad)[8]) {
  if constexpr (B == 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      quad[2 * j] = wd[j] & 0x0f0f0f0fu;
      quad[2 * j + 1] = (wd[j] >> 4) & 0x0f0f0f0fu;
    }
  } else if constexpr (B == 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) quad[j] = wd[j];
  } else if constexpr (B == 2) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int s = 0; s < 4; ++s) quad[4 * j + s] = (wd[j] >> (2 * s)) & 0x03030303u;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int bit = (4 * j + i) * B, wi = bit >> 5, sh = bit & 31;
        uint32_t c = wd[wi] >> sh;
        if (sh + B > 32) c |= wd[wi + 1] << (32 - sh);
        word |= (c & ((1u << B) - 1)) << (8 * i);
      }
      quad[j] = word;
    }
  }
}

// One lane's part of a one-row item (a row's round of 32 groups): the
// group sum of group lane % (32 / P) + 32 / P * j, for the j = lane / (32 /
// P) of this lane. Chunk load j of the item holds chunk c0 + 32 j (codes
// wd[j], skipped past `chunks`); its dp4a with the quantized input xq, then
// a group's P chunk sums (adjacent lanes of one load) added by shuffles, and
// group q of the round handed to lane q. Both one-row kernels
// (affine_int8_row.cu, affine_int8_row_block.cu) call this.
template <int B, int P>
__device__ __forceinline__ int RoundGroupSum(const uint32_t (&wd)[P][B], const int8_t* q, int64_t in_row, int64_t ldq,
                                             int c0, int chunks, int lane) {
  constexpr int G = 32 / P;  // groups per chunk load instruction
  const int8_t* xq = q + in_row * ldq;
  int s[P];
#pragma unroll
  for (int j = 0; j < P; ++j) {
    s[j] = 0;
    if (c0 + 32 * j < chunks) {
      uint32_t quad[8];
      Unpack<B>(wd[j], quad);
      const uint4* qp = reinterpret_cast<const uint4*>(xq + (c0 + 32 * j) * 32);
      const uint4 a = __ldg(qp), b = __ldg(qp + 1);
      int v = Dp4a(quad[0], a.x, 0);
      v = Dp4a(quad[1], a.y, v), v = Dp4a(quad[2], a.z, v), v = Dp4a(quad[3], a.w, v);
      v = Dp4a(quad[4], b.x, v), v = Dp4a(quad[5], b.y, v), v = Dp4a(quad[6], b.z, v);
      s[j] = Dp4a(quad[7], b.w, v);
    }
  }
  int isum = 0;
#pragma unroll
  for (int j = 0; j < P; ++j) {
#pragma unroll
    for (int m = 1; m < P; m <<= 1) s[j] += __shfl_xor_sync(0xffffffffu, s[j], m);
    const int v = __shfl_sync(0xffffffffu, s[j], (lane % G) * P);
    if (lane / G == j) isum = v;
  }
  return isum;
}

// The block-shared one-row kernels (affine_int8_row_block.cu,
// affine_int8_row_mma.cu) keep a row's group terms in shared memory,
// [row][TermsStride(groups)] float4 (float(isum), s * d, b, xs): an odd
// stride, so lanes reading or writing one group of consecutive rows hit
// distinct banks. After a barrier one lane per row folds them in group
// order: the scheme's float sequence, so the same bits as every other path.
__host__ __device__ constexpr int TermsStride(int groups) { return groups | 1; }
__device__ __forceinline__ float4 GroupTerms(int isum, float s, float d, float b, float xs) {
  return make_float4(__int2float_rn(isum), __fmul_rn(s, d), b, xs);
}
__device__ __forceinline__ float FoldGroupTerms(const float4* row_terms, int groups) {
  float acc = 0.0f;
#pragma unroll 8
  for (int g = 0; g < groups; ++g) {
    const float4 v = row_terms[g];
    acc = __fmaf_rn(v.x, v.y, acc);
    acc = __fmaf_rn(v.z, v.w, acc);
  }
  return acc;
}

// Up to kMaxAffineOuts products in one launch: unit b (a block column of
// the tiled kernel, a weight row of the one-row kernel) belongs to product
// i when first_block[i] <= b < first_block[i + 1].
struct OutSet {
  AffineOut out[kMaxAffineOuts];
  int32_t first_block[kMaxAffineOuts + 1] = {};
  int n = 0;

  // Unit b's product (and its index): constant indices only, so the set
  // stays in the parameter bank.
  __device__ __forceinline__ AffineOut Of(unsigned b, int& which) const {
    which = 0;
#pragma unroll
    for (int i = 1; i < kMaxAffineOuts; ++i)
      if (i < n && static_cast<int32_t>(b) >= first_block[i]) which = i;
    AffineOut o = out[0];
#pragma unroll
    for (int i = 1; i < kMaxAffineOuts; ++i)
      if (which == i) o = out[i];
    return o;
  }
};

// The input rows and weights of a block of the tiled kernels (rows of tiles
// of kRowsPerTile): with expert tiles (src.table), tile blockIdx.y's rows
// and its expert's codes, scales and biases (into w, whose vec16 then also
// needs the expert's codes 16-byte aligned); false for a tile past
// *num_tiles (the block does nothing). Plain: the block's rows of src.M.
template <int kRowsPerTile>
__device__ __forceinline__ bool BlockTile(const TileSource& src, DevWeight& w, int64_t& x0, int& count) {
  if (src.table) {
    const int tile = blockIdx.y;
    if (tile >= *src.num_tiles) return false;
    const int e = src.tile_expert[tile];
    x0 = src.tile_start[tile];
    count = src.tile_count[tile];
    w.data = src.table[3 * e];
    w.scales = src.table[3 * e + 1];
    w.biases = src.table[3 * e + 2];
    w.vec16 = w.vec16 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
  } else {
    x0 = static_cast<int64_t>(blockIdx.y) * kRowsPerTile;
    count = static_cast<int>(min(static_cast<int64_t>(kRowsPerTile), src.M - x0));
  }
  return true;
}

// Whether there are products and all have bf16 scales and 16-byte aligned
// codes: what the one-row kernels' instances specialized for them take.
inline bool AllBf16Aligned(std::span<const AffineOut> outs) {
  for (const AffineOut& o : outs)
    if (o.w.scale_type != kSBF16 || !o.w.vec16) return false;
  return !outs.empty();
}

// The instances every affine kernel is built for: f.template operator()<B,
// P>() for B = bits (2, 3, 4, 5 or 6; anything else 8) and P = 32-column
// chunks per group (group 32: 1, 64: 2, anything else 4). Host code.
template <typename F>
void ForAffineFormat(int bits, int group, F&& f) {
  const auto with_bits = [&]<int B>() {
    switch (group) {
      case 32:
        return f.template operator()<B, 1>();
      case 64:
        return f.template operator()<B, 2>();
      default:
        return f.template operator()<B, 4>();
    }
  };
  switch (bits) {
    case 2:
      return with_bits.template operator()<2>();
    case 3:
      return with_bits.template operator()<3>();
    case 4:
      return with_bits.template operator()<4>();
    case 5:
      return with_bits.template operator()<5>();
    case 6:
      return with_bits.template operator()<6>();
    default:
      return with_bits.template operator()<8>();
  }
}

// The set of `outs` (1 to kMaxAffineOuts products sharing column count and
// group size) with `rows_per_unit` weight rows per unit; `what` names the
// caller in errors.
inline OutSet MakeOutSet(std::span<const AffineOut> outs, int64_t rows_per_unit, const char* what) {
  const auto fail = [what](const char* why) { return (std::string(what) + ": " + why); };
  G4_CHECK_MSG(!outs.empty() && outs.size() <= static_cast<size_t>(kMaxAffineOuts),
               fail("1 to kMaxAffineOuts products").c_str());
  const DevWeight& w0 = outs[0].w;
  OutSet set;
  int64_t units = 0;
  for (const AffineOut& o : outs) {
    G4_CHECK_MSG(o.w.cols == w0.cols && o.w.group == w0.group, fail("products differ in shape").c_str());
    set.out[set.n] = o;
    set.first_block[set.n] = static_cast<int32_t>(units);
    units += (o.w.rows + rows_per_unit - 1) / rows_per_unit;
    ++set.n;
  }
  G4_CHECK_MSG(units < (int64_t{1} << 31), fail("too many weight rows").c_str());
  set.first_block[set.n] = static_cast<int32_t>(units);
  return set;
}

}  // namespace g4::cuda
