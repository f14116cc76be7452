// AffineInt8RowMmaMatMul (affine_int8.cuh): the one-row MatMul over 4-bit
// weights with the integer group sums on the int8 tensor cores.
//
// Why: the dp4a one-row kernels issue about 290 warp instructions per KB of
// codes (Nsight Compute, docs/benchmarks.md 2026-12-04), more than the SMs
// can issue at the memory's rate; per 32 codes a lane unpacks a word and
// runs two dp4a, and a group's sum then needs shuffles. One m16n8k32 mma
// takes 16 weight rows x 32 columns at once and leaves each row's sum in
// one register, so the codes cost a load, three logic operations per word
// and an mma per 32 columns of 16 rows (the input row is column 0 of B; the
// other 7 columns are discarded).
//
// Measured on an H100 (docs/cuda.md, MatMul): about 45 % fewer
// instructions than the block-shared dp4a kernel, but slower inside a
// decode step (both kernels wait on their global loads), so it is opt-in
// (G4_CUDA_ROW_MMA=1, kRowMmaByDefault).
//
// A block owns a tile of 16 weight rows of one product (kTileRows) and its
// 8 warps split the groups: warp w takes groups [w G / 8, (w + 1) G / 8).
// Per group, lane (g = lane / 4, t = lane % 4) holds words P t .. P t + P - 1
// of the group's codes of rows g and g + 8 (P = group / 32 words: 4, 8 or
// 16 bytes per row, one load each); mma j takes word P t + j's low nibbles
// as A columns 4t..4t+3 and its high nibbles as 4t+16..4t+19, and B the
// quantized inputs at the word's QPos positions (the even columns' codes,
// then the odd ones': affine_int8.cuh), so row r's group sum isum lands in
// D (r, 0), exact. Lane (g, 0) then writes row g's terms (float(isum),
// s * d, b, xs) to shared memory, lane (g, 1) row g + 8's, and after one
// barrier lanes 0..15 of warp 0 run the 16 rows' float sequences over all
// groups in order, the one-row kernels' formula:
//   y = 0; for g in order: y = fma(float(isum_g), s_g * d_g, y); y = fma(b_g, xs_g, y)
// so the bits are AffineInt8MatMul's. Launched as a programmatic
// dependent: the first groups' codes, scales and biases are requested
// before the wait for the kernel that quantized the input.
#include <algorithm>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/pdl.cuh"

namespace g4::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kTileRows = 16;     // weight rows per block: one mma row tile
constexpr int kBlocksPerSm = 3;   // 85 registers a thread
constexpr int kMaxGroups = 767;   // the terms of 16 rows then take 196 KB of shared memory

// The 16 rows' group terms (affine_int8_core.cuh: TermsStride).
size_t TermsBytes(int groups) { return sizeof(float4) * kTileRows * TermsStride(groups); }

// One group's codes for rows g and g + 8 of the lane (P words each) and the
// scale and bias of the row whose terms the lane writes.
template <int P>
struct GroupLoads {
  uint32_t c0[P], c8[P];
  float s, b;
};

template <int P>
__device__ __forceinline__ void LoadWords(const uint8_t* p, uint32_t (&w)[P]) {
  if constexpr (P == 1) {
    w[0] = __ldg(reinterpret_cast<const uint32_t*>(p));
  } else if constexpr (P == 2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x, w[1] = v.y;
  } else {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
}

// Group gi's codes of the lane's rows g and g + 8 (codes_g, codes_g8 at the
// lane's words). The few-row kernel stages scales and biases per pass.
template <int P>
__device__ __forceinline__ void LoadCodes(const uint8_t* codes_g, const uint8_t* codes_g8, int gi,
                                          GroupLoads<P>& into) {
  LoadWords<P>(codes_g + static_cast<int64_t>(gi) * (16 * P), into.c0);
  LoadWords<P>(codes_g8 + static_cast<int64_t>(gi) * (16 * P), into.c8);
}

// Its codes and the scale and bias of the row whose terms the lane writes.
template <int P>
__device__ __forceinline__ void LoadGroup(const uint8_t* codes_g, const uint8_t* codes_g8, const uint16_t* scales,
                                          const uint16_t* biases, int gi, GroupLoads<P>& into) {
  LoadCodes<P>(codes_g, codes_g8, gi, into);
  into.s = Bf16ToF32(__ldg(scales + gi));
  into.b = Bf16ToF32(__ldg(biases + gi));
}

// Lane t's quantized inputs for group gi of the row at q (q already at the
// lane's 8 P t): the 8 P bytes at QPos positions 32 P gi + 8 P t (words
// P t .. P t + P - 1's even then odd columns), B's fragment words.
template <int P>
__device__ __forceinline__ void LoadInputWords(const int8_t* q, int gi, uint32_t (&qw)[2 * P]) {
  if constexpr (P == 1) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(q + 32 * gi));
    qw[0] = v.x, qw[1] = v.y;
  } else {
#pragma unroll
    for (int h = 0; h < P / 2; ++h) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(q + 32 * P * gi) + h);
      qw[4 * h] = v.x, qw[4 * h + 1] = v.y, qw[4 * h + 2] = v.z, qw[4 * h + 3] = v.w;
    }
  }
}

// A group's exact sums for rows g, g + 8 x B's columns 2t, 2t + 1: mma j
// takes word j's low nibbles as A's columns 4t..4t+3 and its high nibbles
// as 4t+16..4t+19.
template <int P>
__device__ __forceinline__ void GroupSums(const GroupLoads<P>& in, const uint32_t (&qw)[2 * P], int (&acc)[4]) {
  acc[0] = acc[1] = acc[2] = acc[3] = 0;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const uint32_t a[4] = {in.c0[j] & 0x0f0f0f0fu, in.c8[j] & 0x0f0f0f0fu, (in.c0[j] >> 4) & 0x0f0f0f0fu,
                           (in.c8[j] >> 4) & 0x0f0f0f0fu};
    MmaU8S8(acc, a, qw[2 * j], qw[2 * j + 1]);
  }
}

// The block's 16-row tile: its product's codes, scales, biases and output
// from row r0 on, the quantized input row it multiplies and its row count.
struct Tile {
  const uint8_t* codes;
  const uint16_t* scales;
  const uint16_t* biases;
  float* y;
  int64_t row_bytes, r0;
  int32_t in_row, nrows;
  int64_t ldy = 0;  // host-described: the output rows' stride (the few-row kernel's)
};

// Host-described products (set) or a device table of `table_n` products of
// `table_rows` rows each (kTable: the MoE experts of a decode step, written
// by the kernel before this one, read after the wait).
template <bool kTable>
__device__ __forceinline__ Tile TileOf(const OutSet& set, const RowProduct* table, int32_t table_rows) {
  Tile t;
  if constexpr (kTable) {
    const int32_t tiles = (table_rows + kTileRows - 1) / kTileRows;
    const RowProduct pr = table[blockIdx.x / tiles];
    t = Tile{pr.codes, static_cast<const uint16_t*>(pr.scales), static_cast<const uint16_t*>(pr.biases), pr.y,
             pr.row_bytes, static_cast<int64_t>(blockIdx.x % tiles) * kTileRows, pr.in_row, pr.end - pr.first};
  } else {
    int which = 0;
    const AffineOut o = set.Of(blockIdx.x, which);
    t = Tile{static_cast<const uint8_t*>(o.w.data), static_cast<const uint16_t*>(o.w.scales),
             static_cast<const uint16_t*>(o.w.biases), o.y, o.w.row_bytes,
             static_cast<int64_t>(static_cast<int32_t>(blockIdx.x) - set.first_block[which]) * kTileRows, 0,
             static_cast<int32_t>(o.w.rows), o.ldy};
  }
  t.nrows = static_cast<int32_t>(min(static_cast<int64_t>(kTileRows), t.nrows - t.r0));
  return t;
}

template <int P, bool kTable>
__global__ __launch_bounds__(kWarps * 32, kBlocksPerSm) void RowMmaKernel(OutSet set, const RowProduct* table,
                                                                           int32_t table_rows, QRows qr, int groups) {
  // Groups in flight per warp: about 2 KB of codes (a table launch one group
  // fewer: its pointers take the registers).
  constexpr int D = (P == 4 ? 2 : P == 2 ? 4 : 6) - (kTable && P < 4 ? 1 : 0);
  float4* terms = reinterpret_cast<float4*>(DynamicShared());  // [kTileRows][TermsStride(groups)]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  if constexpr (kTable) WaitForPredecessor();  // the table is this step's
  const Tile tile = TileOf<kTable>(set, table, table_rows);
  const int nrows = tile.nrows;
  if (nrows <= 0) return;  // a table product shorter than the launch's rows: the whole block
  // Rows past the product's end read the tile's first row (discarded
  // outputs), so every lane loads and the mma sees whole fragments.
  const int64_t row_g = tile.r0 + (g < nrows ? g : 0), row_g8 = tile.r0 + (g + 8 < nrows ? g + 8 : 0);
  const uint8_t* codes_g = tile.codes + row_g * tile.row_bytes + 4 * P * t;
  const uint8_t* codes_g8 = tile.codes + row_g8 * tile.row_bytes + 4 * P * t;
  const int term_row = t == 0 ? g : g + 8;  // lanes t = 0 and 1 write terms
  const bool writes = t < 2 && term_row < nrows;
  const int64_t scale_row = tile.r0 + (writes ? term_row : 0);
  const uint16_t* scales = tile.scales + scale_row * groups;
  const uint16_t* biases = tile.biases + scale_row * groups;
  const int gb = warp * groups / kWarps, ge = (warp + 1) * groups / kWarps;
  const int ld = TermsStride(groups);

  GroupLoads<P> in[D];
  const auto load = [&](int slot, int gi) {  // slot: a compile-time index after unrolling
    if (gi < ge) LoadGroup<P>(codes_g, codes_g8, scales, biases, gi, in[slot]);
  };
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, gb + d);
  if constexpr (kTable) AllowDependents();  // waited above
  else FollowPredecessor();  // the quantized input is ready; the next op may launch (it waits for this one)

  // Lane t's inputs for group gi: the 8 P bytes at QPos positions 32 P gi +
  // 8 P t (words P t .. P t + P - 1's even then odd columns), the same for
  // every g (B's columns 1..7 repeat column 0 and are discarded).
  const int8_t* q = qr.q + tile.in_row * qr.ldq + 8 * P * t;
  const float* qd = qr.d + tile.in_row * qr.ldg;
  const float* qxs = qr.xs + tile.in_row * qr.ldg;
  for (int g0 = gb; g0 < ge; g0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int gi = g0 + d;
      if (gi >= ge) break;
      uint32_t qw[2 * P];
      LoadInputWords<P>(q, gi, qw);
      int acc[4];
      GroupSums<P>(in[d], qw, acc);
      // D (g, 0) is acc[0] of lane (g, 0), D (g + 8, 0) its acc[2]: lane
      // (g, 1) takes the latter.
      const int up = __shfl_up_sync(0xffffffffu, acc[2], 1);
      const int isum = t == 0 ? acc[0] : up;
      if (writes) terms[term_row * ld + gi] = GroupTerms(isum, in[d].s, qd[gi], in[d].b, qxs[gi]);
      load(d, gi + D);  // the slot's next group flies during the rest
    }
  }
  __syncthreads();
  if (warp == 0 && lane < nrows)  // the rows' float sequences, side by side
    tile.y[tile.r0 + lane] = FoldGroupTerms(terms + lane * ld, groups);
}

template <int P, bool kTable>
void Launch(unsigned blocks, const OutSet& set, const RowProduct* table, int32_t table_rows, const QRows& qr,
            int groups, cudaStream_t stream) {
  static const bool configured = [] {
    G4_CUDA_CHECK(cudaFuncSetAttribute(RowMmaKernel<P, kTable>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(TermsBytes(kMaxGroups))));
    return true;
  }();
  (void)configured;
  LaunchDependent(RowMmaKernel<P, kTable>, dim3(blocks), dim3(kWarps * 32), TermsBytes(groups), stream, set, table,
                  table_rows, qr, groups);
}

template <bool kTable>
void LaunchFor(int group, unsigned blocks, const OutSet& set, const RowProduct* table, int32_t table_rows,
               const QRows& qr, int groups, cudaStream_t stream) {
  switch (group) {
    case 32: return Launch<1, kTable>(blocks, set, table, table_rows, qr, groups, stream);
    case 64: return Launch<2, kTable>(blocks, set, table, table_rows, qr, groups, stream);
    default: return Launch<4, kTable>(blocks, set, table, table_rows, qr, groups, stream);
  }
}

// ---------------------------------------------------------------- few rows

// The same walk for 2 to 32 quantized input rows (a decode batch): B's
// column n is input row 8 i + n of the launch's NI column tiles i, so one
// mma gives 16 weight rows x 8 input rows of group sums, and the codes are
// loaded once for all rows. Lane (g, t) loads input row min(8 i + g, M - 1)
// of each tile (rows past M are discarded columns) and holds D (g, 2t),
// D (g, 2t + 1), D (g + 8, 2t), D (g + 8, 2t + 1) of each. The groups go
// in passes of PG (warp w takes the pass's groups w, w + 8, ...): each
// pass's sums go to shared memory as ints, beside the rows' s, b and the
// inputs' d, xs, and after a barrier the thread of output (m, r) (16 m + r,
// and 256 more) folds it on over the pass's groups in order: the scheme's
// sequence, so the same bits. Two buffers, so the next pass's sums go in
// while the last one's are folded.
//
// The block stages a pass's s, b (16 rows x PG) and d, xs (M rows x PG)
// with coalesced loads issued at the pass's start and stored after its
// groups; output o's sums sit 8 (o / 32) words further on, so the four t
// lanes of a store hit distinct banks (o / 32 = 4 i + t); a thread's
// outputs (the same row r) share their s, b reads; and the fold's and the
// stores' shared-memory offsets are computed once. Before (Nsight Compute
// at 32 x 3840 x 15360 on an H100), a warp gathered one s, b, d and xs per
// row and group from global memory, the stores had 4-way bank conflicts
// and L1 was 89 % busy: 71 -> 53 us there (docs/benchmarks.md,
// 2026-12-06 evening).
// B3 (four column tiles only): one buffer, so that three blocks (24 warps,
// 80 registers) fit an SM instead of two; a second barrier per pass then
// keeps the next pass's stores behind the fold.
template <int NI, bool B3 = false>
struct FewRows {
  static constexpr int kRowsIn = 8 * NI;                    // input rows at most
  static constexpr int kOutputs = kTileRows * kRowsIn;
  static constexpr int kPassGroups = NI == 4 ? 16 : 32;     // a multiple of kWarps
  static constexpr int kPerWarp = kPassGroups / kWarps;
  static constexpr int kStride = kPassGroups + 1;           // odd: a fold's 16 rows read distinct banks
  static constexpr int kSums = kOutputs * kStride + 8 * (kOutputs / 32);  // [16 m + r][j] int, skewed
  static constexpr int kSb = 2 * kTileRows * kStride;          // [r][j] float2 (s, b)
  static constexpr int kDx = 2 * kRowsIn * kStride;            // [m][j] float2 (d, xs)
  static constexpr int kWords = kSums + kSb + kDx;             // one buffer
  static constexpr int kBuffers = B3 ? 1 : 2;
  static constexpr size_t kSmemBytes = kBuffers * sizeof(uint32_t) * kWords;
  static constexpr int kFolds = (kOutputs + kWarps * 32 - 1) / (kWarps * 32);  // outputs a thread
  static constexpr int kSbPer = (kTileRows * kPassGroups + kWarps * 32 - 1) / (kWarps * 32);  // staged a thread
  static constexpr int kDxPer = (kRowsIn * kPassGroups + kWarps * 32 - 1) / (kWarps * 32);
  static constexpr int kBlocks = NI == 4 ? (B3 ? 3 : 2) : kBlocksPerSm;
  static_assert(!B3 || NI == 4, "B3 is for four column tiles");
};

// Output o's sum of pass group j in a buffer's sums.
template <int NI>
__host__ __device__ constexpr int SumAt(int o, int j) {
  return o * FewRows<NI>::kStride + j + 8 * (o >> 5);
}

// The thread's k-th staged element of a pass: row (weight row for s, b;
// input row for d, xs) and pass group j.
template <int NI>
struct Staged {
  int row, j;
  __device__ explicit Staged(int k) {
    const int e = static_cast<int>(threadIdx.x) + k * kWarps * 32;
    row = e / FewRows<NI>::kPassGroups;
    j = e % FewRows<NI>::kPassGroups;
  }
};

template <int P, int NI, bool B3>
__global__ __launch_bounds__(kWarps * 32, FewRows<NI, B3>::kBlocks) void RowsMmaKernel(OutSet set, QRows qr,
                                                                                       int groups, int rows_in) {
  using F = FewRows<NI, B3>;
  // Groups in flight per warp (about 2 KB of codes, fewer with four column
  // tiles' registers), dividing kPerWarp: group k of the warp's sequence
  // sits in slot k % D.
  constexpr int D = NI == 4 || P == 4 ? 2 : 4;
  uint32_t* smem = reinterpret_cast<uint32_t*>(DynamicShared());
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const Tile tile = TileOf<false>(set, nullptr, 0);
  const int nrows = tile.nrows;
  const int64_t row_g = tile.r0 + (g < nrows ? g : 0), row_g8 = tile.r0 + (g + 8 < nrows ? g + 8 : 0);
  const uint8_t* codes_g = tile.codes + row_g * tile.row_bytes + 4 * P * t;
  const uint8_t* codes_g8 = tile.codes + row_g8 * tile.row_bytes + 4 * P * t;
  GroupLoads<P> in[D];
  const auto load = [&](int slot, int gi) {  // slot: a compile-time index after unrolling
    if (gi < groups) LoadCodes<P>(codes_g, codes_g8, gi, in[slot]);
  };
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, warp + kWarps * d);
  FollowPredecessor();  // the quantized inputs are ready; the next op may launch (it waits for this one)

  const int8_t* q[NI];
#pragma unroll
  for (int i = 0; i < NI; ++i) q[i] = qr.q + min(8 * i + g, rows_in - 1) * qr.ldq + 8 * P * t;
  float y[F::kFolds];
#pragma unroll
  for (int f = 0; f < F::kFolds; ++f) y[f] = 0.0f;
  // Where the lane's first sum goes (output 16 (2 t) + g, tile 0), and its
  // outputs' sums and d, xs rows (the same offsets in either buffer).
  const int st = SumAt<NI>(2 * t * kTileRows + g, 0);
  int fold_sum[F::kFolds], fold_dx[F::kFolds];
#pragma unroll
  for (int f = 0; f < F::kFolds; ++f) {
    const int o = min(static_cast<int>(threadIdx.x) + f * kWarps * 32, F::kOutputs - 1);
    fold_sum[f] = SumAt<NI>(o, 0);
    fold_dx[f] = min(o >> 4, rows_in - 1) * F::kStride;
  }
  for (int p0 = 0, pass = 0; p0 < groups; p0 += F::kPassGroups, ++pass) {
    uint32_t* buf = smem + (F::kBuffers == 2 ? (pass & 1) : 0) * F::kWords;
    int* sums = reinterpret_cast<int*>(buf);
    float2* sb = reinterpret_cast<float2*>(buf + F::kSums);
    float2* dx = reinterpret_cast<float2*>(buf + F::kSums + F::kSb);
    const int pe = min(groups, p0 + F::kPassGroups), pg = pe - p0;
    // This pass's s, b and d, xs: the thread's k-th element is (row, j) of
    // the pass (Staged), consecutive threads on consecutive groups of a row.
    float2 sbv[F::kSbPer], dxv[F::kDxPer];
#pragma unroll
    for (int k = 0; k < F::kSbPer; ++k) {
      const Staged<NI> e(k);
      if (e.row < kTileRows && e.j < pg) {
        const int64_t at = (tile.r0 + (e.row < nrows ? e.row : 0)) * groups + p0 + e.j;
        sbv[k] = make_float2(Bf16ToF32(__ldg(tile.scales + at)), Bf16ToF32(__ldg(tile.biases + at)));
      }
    }
#pragma unroll
    for (int k = 0; k < F::kDxPer; ++k) {
      const Staged<NI> e(k);
      if (e.row < rows_in && e.j < pg)
        dxv[k] = make_float2(qr.d[e.row * qr.ldg + p0 + e.j], qr.xs[e.row * qr.ldg + p0 + e.j]);
    }
    for (int i0 = 0; i0 < F::kPerWarp; i0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int gi = p0 + warp + kWarps * (i0 + d);
        if (gi >= pe) break;  // only in the last pass: no later group either
        const int j = gi - p0;
#pragma unroll
        for (int i = 0; i < NI; ++i) {
          uint32_t qw[2 * P];
          LoadInputWords<P>(q[i], gi, qw);
          int acc[4];
          GroupSums<P>(in[d], qw, acc);
          // Outputs 32 t + g + 128 i + c (c = 0, 16, 8, 24): with g + c
          // below 32, SumAt is st's plus SumAt's of 128 i + c.
          int* at = sums + st + j;
          at[SumAt<NI>(128 * i, 0)] = acc[0];
          at[SumAt<NI>(128 * i + 16, 0)] = acc[1];
          at[SumAt<NI>(128 * i + 8, 0)] = acc[2];
          at[SumAt<NI>(128 * i + 24, 0)] = acc[3];
        }
        load(d, gi + kWarps * D);  // the slot's next group flies during the rest
      }
    }
#pragma unroll
    for (int k = 0; k < F::kSbPer; ++k) {
      const Staged<NI> e(k);
      if (e.row < kTileRows && e.j < pg) sb[e.row * F::kStride + e.j] = sbv[k];
    }
#pragma unroll
    for (int k = 0; k < F::kDxPer; ++k) {
      const Staged<NI> e(k);
      if (e.row < rows_in && e.j < pg) dx[e.row * F::kStride + e.j] = dxv[k];
    }
    __syncthreads();  // the pass's sums are in; the buffer written next was folded before this barrier
    // Output o = threadIdx.x + 256 f: row r = o % 16 is the same for
    // every f, so its s, b are read once per group. Only with one fold a
    // thread are there threads without an output (8 input rows: 128).
    static_assert(F::kFolds == 1 || F::kOutputs % (kWarps * 32) == 0, "every thread folds kFolds outputs");
    if (static_cast<int>(threadIdx.x) < F::kOutputs) {
      const float2* sb_r = sb + (threadIdx.x & 15) * F::kStride;
#pragma unroll 4
      for (int j = 0; j < pg; ++j) {
        const float2 v = sb_r[j];
#pragma unroll
        for (int f = 0; f < F::kFolds; ++f) {
          const float2 u = dx[fold_dx[f] + j];
          y[f] = __fmaf_rn(__int2float_rn(sums[fold_sum[f] + j]), __fmul_rn(v.x, u.x), y[f]);
          y[f] = __fmaf_rn(v.y, u.y, y[f]);
        }
      }
    }
    if constexpr (F::kBuffers == 1) __syncthreads();  // the fold has read the buffer the next pass writes
  }
#pragma unroll
  for (int f = 0; f < F::kFolds; ++f) {
    const int o = static_cast<int>(threadIdx.x) + f * kWarps * 32, m = o >> 4, r = o & 15;
    if (o < F::kOutputs && m < rows_in && r < nrows) tile.y[m * tile.ldy + tile.r0 + r] = y[f];
  }
}

template <int P, int NI, bool B3 = false>
void LaunchRows(unsigned blocks, const OutSet& set, const QRows& qr, int groups, int rows_in, cudaStream_t stream) {
  using F = FewRows<NI, B3>;
  static const bool configured = [] {
    G4_CUDA_CHECK(cudaFuncSetAttribute(RowsMmaKernel<P, NI, B3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(F::kSmemBytes)));
    return true;
  }();
  (void)configured;
  LaunchDependent(RowsMmaKernel<P, NI, B3>, dim3(blocks), dim3(kWarps * 32), F::kSmemBytes, stream, set, qr,
                  groups, rows_in);
}

// Whether a launch of `blocks` at 17-32 input rows takes the one-buffer
// instance (three blocks an SM): where that needs fewer waves than two
// blocks an SM. 31b's down (336 blocks against 264 two-an-SM slots on an
// H100) went 139 -> 97 us and its batch-32 decode 826 -> 889 tok/s; where
// both take as many waves the second barrier costs (12b's q/k/v, 512
// blocks: 29.7 against 35.1 us; docs/benchmarks.md, 2026-12-06 night).
// G4_CUDA_ROWS_OCC3=0 never, =1 always (measuring).
bool RowsThreeBlocks(unsigned blocks) {
  static const bool always = EnvSwitch("G4_CUDA_ROWS_OCC3", false);
  static const bool allowed = EnvSwitchOn("G4_CUDA_ROWS_OCC3");
  if (always || !allowed) return always;
  return Waves(blocks, FewRows<4, true>::kBlocks) < Waves(blocks, FewRows<4>::kBlocks);
}

template <int P>
void LaunchRowsFor(unsigned blocks, const OutSet& set, const QRows& qr, int groups, int rows_in,
                   cudaStream_t stream) {
  if (rows_in <= 8) return LaunchRows<P, 1>(blocks, set, qr, groups, rows_in, stream);
  if (rows_in <= 16) return LaunchRows<P, 2>(blocks, set, qr, groups, rows_in, stream);
  if (RowsThreeBlocks(blocks)) return LaunchRows<P, 4, true>(blocks, set, qr, groups, rows_in, stream);
  LaunchRows<P, 4>(blocks, set, qr, groups, rows_in, stream);
}

bool TakesFormat(int bits, int group, int64_t groups) {
  return bits == 4 && (group == 32 || group == 64 || group == 128) && groups <= kMaxGroups;
}

}  // namespace

bool AffineInt8RowMmaMatMulTakes(std::span<const AffineOut> outs, int bits) {
  return AllBf16Aligned(outs) && TakesFormat(bits, outs[0].w.group, outs[0].w.groups_per_row);
}

void AffineInt8RowMmaMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(AffineInt8RowMmaMatMulTakes(outs, bits), "[cuda] AffineInt8RowMmaMatMul: products it does not take");
  const DevWeight& w0 = outs[0].w;
  const OutSet set = MakeOutSet(outs, kTileRows, "[cuda] AffineInt8RowMmaMatMul");
  if (set.first_block[set.n] == 0 || w0.groups_per_row == 0) return;
  LaunchFor<false>(w0.group, static_cast<unsigned>(set.first_block[set.n]), set, nullptr, 0, qr,
                   static_cast<int>(w0.groups_per_row), stream);
}

bool AffineInt8RowMmaMatMulTableTakes(int bits, int group, int64_t cols, int scale_type, bool vec16) {
  return scale_type == kSBF16 && vec16 && cols % group == 0 && TakesFormat(bits, group, cols / group);
}

void AffineInt8RowMmaMatMulTable(const RowProduct* table, int n, int32_t rows, int bits, int group, int64_t cols,
                                 int scale_type, bool vec16, const QRows& qr, cudaStream_t stream) {
  G4_CHECK_MSG(AffineInt8RowMmaMatMulTableTakes(bits, group, cols, scale_type, vec16) && n >= 1 &&
                   n <= kMaxRowProducts && rows >= 0,
               "[cuda] AffineInt8RowMmaMatMulTable: products it does not take");
  const int64_t blocks = static_cast<int64_t>(n) * ((rows + kTileRows - 1) / kTileRows);
  if (blocks == 0 || cols == 0) return;
  LaunchFor<true>(group, static_cast<unsigned>(blocks), OutSet{}, table, rows, qr, static_cast<int>(cols / group),
                  stream);
}

static_assert(FewRows<4>::kRowsIn == kRowsMmaMaxRowsIn, "the header's limit is the widest instance's rows");

bool AffineInt8RowsMmaMatMulTakes(std::span<const AffineOut> outs, int bits, int64_t rows_in) {
  return rows_in >= 2 && rows_in <= kRowsMmaMaxRowsIn && AllBf16Aligned(outs) &&
         TakesFormat(bits, outs[0].w.group, outs[0].w.groups_per_row);
}

void AffineInt8RowsMmaMatMul(std::span<const AffineOut> outs, int bits, const QRows& qr, int64_t rows_in,
                             cudaStream_t stream) {
  G4_CHECK_MSG(AffineInt8RowsMmaMatMulTakes(outs, bits, rows_in),
               "[cuda] AffineInt8RowsMmaMatMul: products it does not take");
  const DevWeight& w0 = outs[0].w;
  const OutSet set = MakeOutSet(outs, kTileRows, "[cuda] AffineInt8RowsMmaMatMul");
  if (set.first_block[set.n] == 0 || w0.groups_per_row == 0) return;
  const auto blocks = static_cast<unsigned>(set.first_block[set.n]);
  const int groups = static_cast<int>(w0.groups_per_row), m = static_cast<int>(rows_in);
  switch (w0.group) {
    case 32: return LaunchRowsFor<1>(blocks, set, qr, groups, m, stream);
    case 64: return LaunchRowsFor<2>(blocks, set, qr, groups, m, stream);
    default: return LaunchRowsFor<4>(blocks, set, qr, groups, m, stream);
  }
}

}  // namespace g4::cuda
