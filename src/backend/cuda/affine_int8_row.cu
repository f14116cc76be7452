// AffineInt8RowMatMul (affine_int8.cuh): one quantized input row against
// affine weights (every product of one launch), no block barriers in the
// walk.
//
// Warp w of W owns the weight rows [w * N / W, (w + 1) * N / W) of the
// launch's N rows (the products' rows one after another), so a warp's
// bytes are contiguous and warps differ by at most one row. It walks them
// in batches of up to kBatch rows of one product, and a batch round by round
// (a round is 32 groups), row by row within the round. Item = (row, round):
// chunk load instruction j of the item reads chunks 32j .. 32j + 31 of the
// round (32 columns each), so a warp load is contiguous bytes (512 at
// 4-bit); a lane's chunk sums (dp4a of the unpacked codes with the quantized
// input) are added into group sums by shuffles and handed to lane g = the
// group within the round, which writes the group's four terms for the row to
// shared memory. After the round's last row, lane r continues row r's float
// sequence over the round's groups in order:
//   y = fma(float(isum), s * d, y);  y = fma(b, xs, y),
// the tiled kernel's phase 2, so the bits are the same. The sequence is the
// serial part; a batch's rows share it, one lane each.
//
// The codes (and scales, biases) of the next D items are in flight across
// row, round and batch boundaries. Per item the walk costs a few integer
// operations: the product of a batch is looked up once, in a table the
// block copies to shared memory: from the launch's parameters, or from a
// table in device memory (AffineInt8RowMatMulTable: the MoE experts a
// decode step chose on the device, each product with its own input row).
// Launched as a programmatic dependent (sm_90): with host-described
// products, the first items' codes, scales and biases are requested before
// the wait for the kernel that quantized the input; a table is read after
// it.
#include <algorithm>
#include <utility>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/device_info.h"
#include "core/check.h"

namespace g4::cuda {
namespace {

constexpr int kRowWarps = 8;  // warps per block
constexpr int kRowBlocksPerSm = 4;
constexpr int kBatch = 8;  // rows whose float sequences run side by side
static_assert(sizeof(RowProduct) == 56, "a host-described launch's shared memory stays 4 x 56 bytes of products");

// Items a lane keeps in flight (P * B words of codes each).
template <int B, int P>
constexpr int ItemsInFlight() {
  return P * B <= 16 ? 2 : 1;
}

// Where a warp is: batch [s, s + n) of product p (its rows s - first ...),
// round k, row i of the batch.
struct Walk {
  int32_t s = 0, n = 0, p = 0, k = 0, i = 0;

  __device__ __forceinline__ void Batch(const RowProduct* prod, int nprod, int32_t end) {
    p = 0;
    for (int q = 1; q < nprod; ++q)  // products in launch order: the last that starts at or before s
      if (s >= prod[q].first) p = q;
    n = min(min(kBatch, end - s), prod[p].end - s);
  }
  __device__ __forceinline__ void Next(int rounds, const RowProduct* prod, int nprod, int32_t end) {
    if (++i < n) return;
    i = 0;
    if (++k < rounds) return;
    k = 0;
    s += n;
    if (s < end) Batch(prod, nprod, end);
  }
};

// The products come from the launch's parameters (set, host-described) or,
// when table is set, from device memory written earlier in the stream
// (table_n products, table_units rows, table_groups groups per row).
// kScale: every product's scale type when known at compile time (bf16, the
// common case), or -1: read per product. kVec16: every product's codes are
// known to be 16-byte aligned, or false: read per product.
template <int B, int P, bool kTable, int kScale, bool kVec16>
__global__ __launch_bounds__(kRowWarps * 32, kRowBlocksPerSm) void AffineInt8RowKernel(
    OutSet set, QRows qr, const RowProduct* __restrict__ table, int table_n, int32_t table_units, int table_groups) {
  constexpr int D = ItemsInFlight<B, P>();
  // [row][group], padded: lanes r read one group without conflicts.
  __shared__ float4 terms[kRowWarps][kBatch][33];
  // Host-described launches keep the small table (their shared memory, so
  // their blocks per SM, as before the device tables).
  __shared__ RowProduct prod[kTable ? kMaxRowProducts : kMaxAffineOuts];
  if constexpr (kTable) {
    WaitForPredecessor();  // the table is this step's
    if (threadIdx.x < table_n) prod[threadIdx.x] = table[threadIdx.x];
  } else if (threadIdx.x < kMaxAffineOuts) {
#pragma unroll
    for (int q = 0; q < kMaxAffineOuts; ++q) {
      if (q != static_cast<int>(threadIdx.x))
        continue;  // constant indices: the set stays in the parameter bank
      const AffineOut& o = set.out[q];
      prod[q] = RowProduct{static_cast<const uint8_t*>(o.w.data),
                           o.w.scales,
                           o.w.biases,
                           o.y,
                           o.w.row_bytes,
                           set.first_block[q],
                           set.first_block[q + 1],
                           static_cast<int16_t>(o.w.scale_type),
                           static_cast<int16_t>(o.w.vec16 ? 1 : 0),
                           0};
    }
  }
  __syncthreads();
  const int nprod = kTable ? table_n : set.n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t units = kTable ? table_units : set.first_block[nprod];
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kRowWarps;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kRowWarps + warp;
  const int32_t begin = static_cast<int32_t>(gw * units / warps),
                end = static_cast<int32_t>((gw + 1) * units / warps);
  if (begin >= end) return;
  const int groups = kTable ? table_groups : static_cast<int>(set.out[0].w.groups_per_row),
            chunks = groups * P;  // columns / 32: far below 2^31
  const int rounds = (groups + 31) / 32;

  uint32_t wd[D][P][B];
  float sc[D], bi[D];
  const auto load = [&](int slot, const Walk& c) {  // slot: a compile-time index after unrolling
    if (c.s >= end) return;
    const RowProduct& pr = prod[c.p];
    const int64_t row = c.s - pr.first + c.i;
    const uint8_t* base = pr.codes + row * pr.row_bytes;
    const int c0 = c.k * 32 * P + lane;
#pragma unroll
    for (int j = 0; j < P; ++j)
      if (c0 + 32 * j < chunks)
        LoadCodeWords<B>(base + (c0 + 32 * j) * (4 * B), kVec16 || pr.vec16 != 0, wd[slot][j]);
    const int g = c.k * 32 + lane;
    if (g < groups) {
      const int type = kScale >= 0 ? kScale : pr.scale_type;
      sc[slot] = LoadScale(type, pr.scales, row * groups + g);
      bi[slot] = LoadScale(type, pr.biases, row * groups + g);
    }
  };
  Walk ahead;
  ahead.s = begin;
  ahead.Batch(prod, nprod, end);
  Walk at = ahead;
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, ahead), ahead.Next(rounds, prod, nprod, end);
  FollowPredecessor();  // the quantized input is ready; the next op may launch (it waits for this one)

  float acc = 0.0f;  // lane r: row r of the batch
  while (at.s < end) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (at.s >= end) break;
      const int c0 = at.k * 32 * P + lane;
      const int64_t in_row = kTable ? prod[at.p].in_row : 0;  // host-described: row 0, folded away
      const int isum = RoundGroupSum<B, P>(wd[d], qr.q, in_row, qr.ldq, c0, chunks, lane);
      const int g = at.k * 32 + lane;
      if (g < groups)
        terms[warp][at.i][lane] =
            make_float4(__int2float_rn(isum), __fmul_rn(sc[d], qr.d[in_row * qr.ldg + g]), bi[d],
                        qr.xs[in_row * qr.ldg + g]);
      load(d, ahead);  // the slot's next item flies during the sequence
      ahead.Next(rounds, prod, nprod, end);
      if (at.i == at.n - 1) {  // the round's last row: the rows' float sequences
        __syncwarp();
        if (lane < at.n) {
          const int nch = min(32, groups - at.k * 32);
#pragma unroll 8
          for (int gl = 0; gl < nch; ++gl) {
            const float4 t = terms[warp][lane][gl];
            acc = __fmaf_rn(t.x, t.y, acc);
            acc = __fmaf_rn(t.z, t.w, acc);
          }
          if (at.k == rounds - 1) {  // the batch's rows are done
            const RowProduct& pr = prod[at.p];
            pr.y[at.s - pr.first + lane] = acc;
            acc = 0.0f;
          }
        }
        __syncwarp();
      }
      at.Next(rounds, prod, nprod, end);
    }
  }
}

template <int B, int P, bool kTable, int kScale, bool kVec16>
void LaunchKernel(const OutSet& set, const QRows& qr, const RowProduct* table, int table_n, int64_t units, int groups,
                  cudaStream_t stream) {
  static const bool configured = [] {  // 4 blocks' terms (34 KB each, 36 with a device table), the rest L1
    G4_CUDA_CHECK(cudaFuncSetAttribute(AffineInt8RowKernel<B, P, kTable, kScale, kVec16>,
                                       cudaFuncAttributePreferredSharedMemoryCarveout, kTable ? 72 : 60));
    return true;
  }();
  (void)configured;
  const int64_t blocks = (units + kRowWarps - 1) / kRowWarps;
  if (blocks == 0) return;
  LaunchDependent(AffineInt8RowKernel<B, P, kTable, kScale, kVec16>,
                  dim3(static_cast<unsigned>(std::min<int64_t>(blocks, ResidentSlots(kRowBlocksPerSm)))),
                  dim3(kRowWarps * 32), 0, stream, set, qr, table, table_n, static_cast<int32_t>(units), groups);
}

// A table's products share scale_type (the experts of one matrix).
template <int B, int P>
void Launch(const OutSet& set, const QRows& qr, const RowProduct* table, int table_n, int scale_type, int64_t units,
            int groups, cudaStream_t stream) {
  if (table) {
    if (scale_type == kSBF16)
      return LaunchKernel<B, P, true, kSBF16, false>(set, qr, table, table_n, units, groups, stream);
    return LaunchKernel<B, P, true, -1, false>(set, qr, table, table_n, units, groups, stream);
  }
  // Host-described products that all have bf16 scales and 16-byte aligned
  // codes take the kernel specialized for them (no per-item type checks).
  if (AllBf16Aligned(std::span<const AffineOut>(set.out, static_cast<size_t>(set.n))))
    return LaunchKernel<B, P, false, kSBF16, true>(set, qr, table, table_n, units, groups, stream);
  LaunchKernel<B, P, false, -1, false>(set, qr, table, table_n, units, groups, stream);
}

bool RowMmaOn() {
  static const bool on = EnvSwitch("G4_CUDA_ROW_MMA", kRowMmaByDefault);
  return on;
}

}  // namespace

void AffineInt8RowMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(!outs.empty(), "[cuda] AffineInt8RowMatMul: no products");
  if (RowMmaOn() && AffineInt8RowMmaMatMulTakes(outs, bits)) return AffineInt8RowMmaMatMul(outs, bits, qr, stream);
  if (AffineInt8RowBlockMatMulTakes(outs)) return AffineInt8RowBlockMatMul(outs, bits, qr, stream);
  const DevWeight& w0 = outs[0].w;
  if (w0.groups_per_row == 0) return;
  const OutSet set = MakeOutSet(outs, 1, "[cuda] AffineInt8RowMatMul");
  const int64_t units = set.first_block[set.n];
  const int groups = static_cast<int>(w0.groups_per_row);
  ForAffineFormat(bits, w0.group, [&]<int B, int P>() {
    Launch<B, P>(set, qr, nullptr, 0, -1, units, groups, stream);
  });
}

void AffineInt8RowMatMulTable(const RowProduct* table, int n, int64_t units, int bits, int group, int64_t cols,
                              int scale_type, bool vec16, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(n >= 1 && n <= kMaxRowProducts && units < (int64_t{1} << 31) && cols % group == 0 && units % n == 0,
               "[cuda] AffineInt8RowMatMulTable: 1 to kMaxRowProducts products of whole groups");
  if (cols == 0) return;
  if (RowMmaOn() && AffineInt8RowMmaMatMulTableTakes(bits, group, cols, scale_type, vec16))
    return AffineInt8RowMmaMatMulTable(table, n, static_cast<int32_t>(units / n), bits, group, cols, scale_type,
                                       vec16, qr, stream);
  const int groups = static_cast<int>(cols / group);
  ForAffineFormat(bits, group, [&]<int B, int P>() {
    Launch<B, P>(OutSet{}, qr, table, n, scale_type, units, groups, stream);
  });
}

}  // namespace g4::cuda
