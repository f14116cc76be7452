// AffineInt8RowBlockMatMul (affine_int8.cuh): the one-row MatMul with the
// 8 warps of a block sharing the block's 8 weight rows (16 in large 4-bit
// launches: kWideRows below).
//
// Why: the one-row kernel (affine_int8_row.cu) gives each warp its own rows
// and runs their float sequences side by side, one lane per row. Most
// decode products have fewer rows than the device has warps (e4b: q/k/v
// 3072, o and down 2560 against 4224 resident warps), so a warp holds one
// row and pays each round's sequence (about 96 instructions in one lane)
// for it alone. Here the block's warps split the block's (row, round)
// items between them, each item's group terms go to shared memory, and
// after one barrier lanes 0..7 (0..15) of warp 0 run the rows' sequences
// side by side: one sequence's instructions per 8 (16) rows, at any row
// count.
//
// An item is (row r, round k), as in the one-row kernel: chunk load j of
// lane l reads chunk 32 P k + 32 j + l of row r (contiguous bytes across the
// warp), the lane's chunk sums (dp4a of the unpacked codes with the
// quantized input) are added into group sums by shuffles, and lane g of the
// round writes group 32 k + g's terms (float(isum), s * d, b, xs) to
// terms[r][32 k + g]. Warp w takes items w, w + 8, ... in row-major order,
// D of them in flight. The sequence is the one-row kernel's, so the bits
// are the same:
//   y = 0; for g in order: y = fma(float(isum_g), s_g * d_g, y); y = fma(b_g, xs_g, y).
// Launched as a programmatic dependent: the first items' codes, scales and
// biases are requested before the wait for the kernel that quantized the
// input.
#include <algorithm>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/env_switch.h"

namespace g4::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 8;  // weight rows per block; the sequences' lanes
// 4-bit launches whose 16-row blocks still fill every resident slot (and
// whose terms fit) take blocks of 16 rows: a warp's items are pipelined two
// deep through four, and a block's barrier and fold serve twice the rows
// (H100, 2026-12-07, us per MatMul at one row, 8 / 16 rows a block:
// 10240 x 2560 11.8 / 10.3, 15360 x 3840 21.2 / 19.1, the 262144-row head
// 192 / 167; with fewer blocks than slots 16 loses: 2560 x 10240 12.5 /
// 16.6). G4_CUDA_ROW_BLOCK_16=0: never (measuring).
constexpr int kWideRows = 16;
constexpr int kBlocksPerSm = 4;
constexpr size_t kMaxTermsBytes = 48 * 1024;  // without the dynamic shared memory opt-in

// The dynamic shared memory of a block's terms: `rows` rows of `groups`.
constexpr size_t TermsBytes(int rows, int groups) { return sizeof(float4) * rows * TermsStride(groups); }

// A block row: product row `row` of its matrix, bf16 scales.
struct BlockRow {
  const uint8_t* codes;      // the row's codes (16-byte aligned)
  const uint16_t* scales;    // the row's first group's scale
  const uint16_t* biases;
  float* y;                  // its output
};

// Where a warp is in the block's items: row r, round k.
struct ItemPos {
  int r, k;
  __device__ __forceinline__ void Advance(int by, int rounds) {
    k += by;
    while (k >= rounds) k -= rounds, ++r;
  }
};

template <int B, int P, int R>
__global__ __launch_bounds__(kWarps * 32, kBlocksPerSm) void RowBlockKernel(OutSet set, QRows qr, int32_t units,
                                                                               int groups) {
  constexpr int D = P * B <= 16 ? 2 : 1;  // items in flight per warp
  float4* terms = reinterpret_cast<float4*>(DynamicShared());  // [R][TermsStride(groups)]
  __shared__ BlockRow rows[R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t row0 = static_cast<int32_t>(blockIdx.x) * R;
  const int nrows = min(R, units - row0);
  if (static_cast<int>(threadIdx.x) < nrows) {
    int which = 0;
    const AffineOut o = set.Of(static_cast<unsigned>(row0) + threadIdx.x, which);
    const int64_t r = row0 + static_cast<int32_t>(threadIdx.x) - set.first_block[which];
    rows[threadIdx.x] = BlockRow{static_cast<const uint8_t*>(o.w.data) + r * o.w.row_bytes,
                                 static_cast<const uint16_t*>(o.w.scales) + r * groups,
                                 static_cast<const uint16_t*>(o.w.biases) + r * groups, o.y + r};
  }
  __syncthreads();
  const int rounds = (groups + 31) / 32, chunks = groups * P, items = nrows * rounds;
  const int ld = TermsStride(groups);

  uint32_t wd[D][P][B];
  float sc[D], bi[D];
  const auto load = [&](int slot, int t, const ItemPos& at) {  // slot: a compile-time index after unrolling
    if (t >= items) return;
    const BlockRow& br = rows[at.r];
    const int c0 = at.k * 32 * P + lane;
#pragma unroll
    for (int j = 0; j < P; ++j)
      if (c0 + 32 * j < chunks) LoadCodeWords<B>(br.codes + (c0 + 32 * j) * (4 * B), true, wd[slot][j]);
    const int g = at.k * 32 + lane;
    if (g < groups) {
      sc[slot] = Bf16ToF32(__ldg(br.scales + g));
      bi[slot] = Bf16ToF32(__ldg(br.biases + g));
    }
  };
  ItemPos ahead{0, 0};
  ahead.Advance(warp, rounds);
  ItemPos at = ahead;
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, warp + kWarps * d, ahead), ahead.Advance(kWarps, rounds);
  FollowPredecessor();  // the quantized input is ready; the next op may launch (it waits for this one)

  for (int t0 = warp; t0 < items; t0 += kWarps * D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int t = t0 + kWarps * d;
      if (t >= items) break;
      const int c0 = at.k * 32 * P + lane;
      const int isum = RoundGroupSum<B, P>(wd[d], qr.q, 0, qr.ldq, c0, chunks, lane);
      const int g = at.k * 32 + lane;
      if (g < groups)
        terms[at.r * ld + g] = GroupTerms(isum, sc[d], qr.d[g], bi[d], qr.xs[g]);
      load(d, t + kWarps * D, ahead);  // the slot's next item flies during the rest
      ahead.Advance(kWarps, rounds);
      at.Advance(kWarps, rounds);
    }
  }
  __syncthreads();
  if (warp == 0 && lane < nrows) *rows[lane].y = FoldGroupTerms(terms + lane * ld, groups);  // side by side
}

template <int B, int P, int R>
void LaunchRows(const OutSet& set, const QRows& qr, int32_t units, int groups, cudaStream_t stream) {
  static const bool configured = [] {  // up to 4 blocks' terms (48 KB each at most), the rest L1
    G4_CUDA_CHECK(cudaFuncSetAttribute(RowBlockKernel<B, P, R>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                       cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  LaunchDependent(RowBlockKernel<B, P, R>, dim3(static_cast<unsigned>((units + R - 1) / R)), dim3(kWarps * 32),
                  TermsBytes(R, groups), stream, set, qr, units, groups);
}

bool WideRowsFor(int32_t units, int groups) {
  static const bool on = EnvSwitch("G4_CUDA_ROW_BLOCK_16", true);
  return on && TermsBytes(kWideRows, groups) <= kMaxTermsBytes &&
         (units + kWideRows - 1) / kWideRows >= ResidentSlots(kBlocksPerSm);
}

template <int B, int P>
void LaunchBlock(const OutSet& set, const QRows& qr, int32_t units, int groups, cudaStream_t stream) {
  if constexpr (B == 4) {
    if (WideRowsFor(units, groups)) return LaunchRows<B, P, kWideRows>(set, qr, units, groups, stream);
  }
  LaunchRows<B, P, kRows>(set, qr, units, groups, stream);
}

bool Enabled() {
  static const bool enabled = EnvSwitchOn("G4_CUDA_ROW_BLOCK");
  return enabled;
}

}  // namespace

bool AffineInt8RowBlockMatMulTakes(std::span<const AffineOut> outs) {
  if (!Enabled() || !AllBf16Aligned(outs)) return false;
  return TermsBytes(kRows, static_cast<int>(outs[0].w.groups_per_row)) <= kMaxTermsBytes;
}

void AffineInt8RowBlockMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(AffineInt8RowBlockMatMulTakes(outs), "[cuda] AffineInt8RowBlockMatMul: products it does not take");
  const DevWeight& w0 = outs[0].w;
  if (w0.groups_per_row == 0) return;
  const OutSet set = MakeOutSet(outs, 1, "[cuda] AffineInt8RowBlockMatMul");
  const int32_t units = set.first_block[set.n];
  if (units == 0) return;
  const int groups = static_cast<int>(w0.groups_per_row);
  ForAffineFormat(bits, w0.group,
                  [&]<int B, int P>() { LaunchBlock<B, P>(set, qr, units, groups, stream); });
}

}  // namespace g4::cuda
