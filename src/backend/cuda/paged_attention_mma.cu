// The split states of Ops::PagedAttention on the bf16 tensor cores, for
// stores whose format is plain bf16 with 16-byte aligned head slices and a
// head_dim of 64, 128, 256 or 512 (AttnStore::mma), unless G4_CUDA_ATTN_MMA
// is "0" (MmaModeOn). A store's
// format decides, never the step, so every row of such a store, decode or
// prefill, takes this order:
//
// An "entry" is a (row, query head). Per split of kSplitKeys keys (the
// split kernel's cut: the same states, the same merge), 16 entries are one
// m16n8k16 row tile:
//  - scores: q is cut into three bf16 terms (SplitBf16, about 2^-24 of q);
//    per 16 head elements, in order, one mma adds hi . k to a first
//    accumulator, two more add mid . k and lo . k to a second;
//    s = (first + second) * scale. Column c is the split's key c.
//  - softmax: per entry, lane l holds columns l and l + 32; columns outside
//    the entry's keys (window, causal) are -inf and p = 0; m = warp max,
//    p = exp(s - m), l = WarpSum(p_l + p_{l+32}).
//  - values: p is cut into three bf16 terms; per 16 keys, in order, three
//    mmas (hi, mid, lo) add p . v into one accumulator per element; then
//    + 0.0f (a zero sum is +0 whichever zero products made it).
// An mma's output element depends only on its row of A, its column of B
// and its accumulator, so an entry's state has the same bits whichever
// block, warp, tile position or neighbours computed it: the row kernel
// (EG = 1: one row's heads per block, its 4 warps sharing out key and value
// column tiles) and the run kernel (EG = 4: 64 entries of consecutive rows
// per block, a warp per 16) give the same states by construction. Columns
// outside every entry's keys hold zeros (V) or anything (K: masked), and a
// masked column's product is 0 * v. The one difference: a non-finite value
// of a key that is visible to a later row of a prefill tile but not to an
// earlier one gives that earlier row 0 * inf = NaN, where its decode row
// never reads the key.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/attention_last_merge.cuh"
#include "backend/cuda/bf16_terms.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dynamic_shared.cuh"
#include "backend/cuda/env_switch.h"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/paged_attention_core.cuh"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace g4::cuda::attn {
namespace {

constexpr int kMmaWarps = 4;  // per block, unless the row kernel takes 8 (MmaShape's W)
constexpr int kEntryTile = 16;                 // entries per mma row tile
constexpr int kKeyTiles = kSplitKeys / 8;      // score column tiles per split
constexpr int kKeyChunks = kSplitKeys / 16;    // value k-steps per split
constexpr int kScoreStride = kSplitKeys + 1;   // floats per score row
constexpr int kPStride = kSplitKeys + 8;       // bf16 per p row: A-fragment words on distinct banks

// SHARE: the values land in the keys' buffer once the scores are done (the
// block's shared memory halves, at the price of the copies overlapping no
// work of the same block). W: warps per block (8 only for the row kernel
// at head_dim 128 or more: each warp then takes half as many value columns
// and copies; the scores stay with 4 of them, two key tiles each).
template <int D, int EG, bool SHARE, bool QT = true, int W = kMmaWarps>
struct MmaShape {
  static constexpr int kWarps = W;
  static constexpr int kThreads = W * 32;
  static constexpr int kEntries = kEntryTile * EG;
  // bf16 per key row: 16 bytes of padding put ldmatrix's 8 rows on
  // distinct banks.
  static constexpr int kKvStride = D + 8;
  static constexpr int kWarpsPerGroup = W / EG;  // warps sharing one 16-entry tile
  // Warps of a tile computing scores (at least two key tiles each: the
  // score loop takes them in pairs); the others wait at the barrier.
  static constexpr int kScoreParts = kWarpsPerGroup < kKeyTiles / 2 ? kWarpsPerGroup : kKeyTiles / 2;
  static constexpr int kScoreTiles = kKeyTiles / kScoreParts;
  static constexpr int kValueTiles = D / 8 / kWarpsPerGroup;
  static constexpr int kValueBatch = kValueTiles < 8 ? kValueTiles : 8;  // column tiles accumulated at once
  static constexpr size_t kKvBytes = size_t{kSplitKeys} * kKvStride * 2;
  static constexpr size_t kScoreBytes = size_t{kEntries} * kScoreStride * 4;
  static constexpr size_t kPBytes = size_t{3} * kEntries * kPStride * 2;
  static constexpr size_t kKvBuffers = SHARE ? 1 : 2;
  static constexpr size_t kStatBytes = size_t{kEntries} * 2 * 4;
  // The row kernel's q as three bf16 terms, [3][16 entries][D + 8] (rows
  // padded as the keys'), split once per block instead of once per warp.
  static constexpr bool kQTerms = EG == 1 && QT;
  static constexpr size_t kQBytes = kQTerms ? size_t{3} * kEntryTile * kKvStride * 2 : 0;
  static constexpr size_t kBytes = kKvBuffers * kKvBytes + kScoreBytes + kPBytes + kStatBytes + kQBytes;
  static_assert(kScoreTiles % 2 == 0 && kValueBatch % 2 == 0 && kValueTiles % kValueBatch == 0);
  static_assert(kKvBytes % 16 == 0 && kScoreBytes % 16 == 0);
};

// A tile row of the current segment: its keys in the split (first = offset
// from the split's first key; count 0: no state) and its split index.
struct MmaRow {
  int first, count, split;
};

template <int D, int EG, bool SHARE, bool QT, int W>
__global__ __launch_bounds__(W * 32, 1) void MmaKernel(AttnParams a, int tile_rows, int heads_per_group,
                                                       int head_groups, int64_t rows, bool early_wait,
                                                       bool allow_early) {
  using S = MmaShape<D, EG, SHARE, QT, W>;
  constexpr int kMmaThreads = S::kThreads;
  constexpr int E = S::kEntries;
  uint8_t* mma_smem = DynamicShared();
  __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(mma_smem);  // [key][kKvStride]
  __nv_bfloat16* vs = ks + (SHARE ? 0 : kSplitKeys * S::kKvStride);
  uint8_t* rest = mma_smem + S::kKvBuffers * S::kKvBytes;
  float* sc = reinterpret_cast<float*>(rest);                                           // [E][kScoreStride]
  __nv_bfloat16* pt = reinterpret_cast<__nv_bfloat16*>(rest + S::kScoreBytes);         // [3][E][kPStride]
  float* stats = reinterpret_cast<float*>(rest + S::kScoreBytes + S::kPBytes);        // [2][E]
  __nv_bfloat16* qt = reinterpret_cast<__nv_bfloat16*>(rest + S::kScoreBytes + S::kPBytes + S::kStatBytes);
  __shared__ MmaRow trow[E];
  __shared__ const uint8_t* krec[kSplitKeys];
  __shared__ int span[2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int kh = blockIdx.y / head_groups, hg = blockIdx.y % head_groups;
  const int G = a.group, g0 = hg * heads_per_group;
  const int gn = min(heads_per_group, G - g0);
  const int64_t t0 = static_cast<int64_t>(blockIdx.z) * tile_rows;
  // Launched as a dependent. It waits for its predecessor once it has read
  // what the step uploaded (rows, block tables) and requested its keys'
  // lines into L2 (below), unless G4_CUDA_ATTN_LATE_WAIT is 0 (early_wait:
  // the measuring switch). Then (allow_early, unless G4_CUDA_ATTN_ALLOW is
  // 0) it lets the merge launch: the merge's own wait still finds every
  // state of this kernel (pdl.cuh); without, the merge launches once every
  // block has exited (H100 decode at 512: e4b +0.7 %, 12b +1.5 %).
  if (early_wait) {
    WaitForPredecessor();
    if (allow_early) AllowDependents();
  }
  if (t0 >= rows) return;  // never in the row kernel (a grid z per row), whose every block must reach its merge
  const int64_t t_end = std::min<int64_t>(t0 + tile_rows, rows);
  const int64_t state = StateFloats(a);

  for (int64_t cur = t0; cur < t_end;) {
    const Segment sg = NextSegment(a, cur, t_end);
    const int32_t seq = sg.seq;
    const int seg_rows = sg.rows;
    const int64_t seg0 = sg.seg0;
    if (!MmaSeq(a, seq)) continue;
    const RowInfo first = ReadRow(a, a.row0 + seg0);
    const int32_t s_abs = first.lo / kSplitKeys + static_cast<int32_t>(blockIdx.x);
    const int32_t k0 = s_abs * kSplitKeys;
    const AttnStore st = first.store == 0 ? a.store[0] : a.store[1];
    __syncthreads();  // the previous segment is done with the shared arrays
    if (warp == 0) {
      int lo = kSplitKeys, hi = 0;
      for (int i = lane; i < tile_rows; i += 32) {
        int f = 0, c = 0, sp = 0;
        if (i < seg_rows) {
          const RowInfo ri = ReadRow(a, a.row0 + seg0 + i);
          if (s_abs >= ri.lo / kSplitKeys && k0 <= ri.pos) {
            const int32_t kb = max(ri.lo, k0), ke = min(ri.pos + 1, k0 + kSplitKeys);
            f = kb - k0;
            c = ke - kb;
            sp = s_abs - ri.lo / kSplitKeys;
            lo = min(lo, f);
            hi = max(hi, f + c);
          }
        }
        trow[i] = MmaRow{f, c, sp};
      }
      lo = static_cast<int>(__reduce_min_sync(0xffffffffu, static_cast<unsigned>(lo)));
      hi = static_cast<int>(__reduce_max_sync(0xffffffffu, static_cast<unsigned>(hi)));
      if (lane == 0) span[0] = lo, span[1] = hi;
    }
    __syncthreads();
    const int u0 = span[0], u1 = span[1];
    if (u1 <= u0) continue;  // no row of the segment reaches this split
    if (st.records == nullptr) __trap();

    // 1. The split's keys u0 .. u1 - 1 (K, then V) into shared memory;
    // value rows outside them are zeros (their p is 0, and 0 * 0 adds +0).
    if (threadIdx.x < u1 - u0) krec[threadIdx.x] = Record(a, st, seq, k0 + u0 + static_cast<int32_t>(threadIdx.x));
    __syncthreads();
    constexpr int kPieces = D / 8;  // 16-byte pieces per head slice
    const int64_t slice = static_cast<int64_t>(kh) * D * 2;
    const int n_pieces = (u1 - u0) * kPieces;
    // The keys' K and V lines into L2 while the predecessor may still run
    // (L2 is where the predecessor's writes land, so nothing stale can be
    // read), then the wait: K, V (this step's KvWrite) and q are this
    // step's. A no-op after the first segment.
    constexpr int kLines = D * 2 / 128;  // 128-byte lines per head slice
    for (int i = threadIdx.x; i < (u1 - u0) * kLines; i += kMmaThreads) {
      const uint8_t* r = krec[i / kLines] + slice + (i % kLines) * 128;
      PrefetchL2(r + st.f.k_codes);
      PrefetchL2(r + st.f.v_codes);
    }
    WaitForPredecessor();
    if (allow_early) AllowDependents();
    for (int i = threadIdx.x; i < n_pieces; i += kMmaThreads) {
      const int j = i / kPieces, p = i - j * kPieces;
      CpAsync16(ks + (u0 + j) * S::kKvStride + p * 8, krec[j] + st.f.k_codes + slice + p * 16);
    }
    CpAsyncCommit();
    auto load_values = [&] {
      for (int i = threadIdx.x; i < n_pieces; i += kMmaThreads) {
        const int j = i / kPieces, p = i - j * kPieces;
        CpAsync16(vs + (u0 + j) * S::kKvStride + p * 8, krec[j] + st.f.v_codes + slice + p * 16);
      }
      CpAsyncCommit();
      for (int i = threadIdx.x; i < (kSplitKeys - (u1 - u0)) * kPieces; i += kMmaThreads) {
        int j = i / kPieces;
        const int p = i - j * kPieces;
        j = j < u0 ? j : j + (u1 - u0);
        *reinterpret_cast<uint4*>(vs + j * S::kKvStride + p * 8) = make_uint4(0, 0, 0, 0);
      }
    };
    if (!SHARE) load_values();

    // An entry e of the block: tile row e / heads_per_group, head g0 +
    // e % heads_per_group; live when both exist and the row has keys here.
    auto live = [&](int e, int& row) {
      row = e / heads_per_group;
      return row < seg_rows && e - row * heads_per_group < gn && trow[row].count > 0;
    };
    const int eg = warp % EG;                           // the warp's 16-entry tile
    const int part = warp / EG;                         // its share of the tile's columns
    const int e_a = eg * kEntryTile + g, e_b = e_a + 8;  // its fragment rows
    int row_a, row_b;
    const bool live_a = live(e_a, row_a), live_b = live(e_b, row_b);
    const float* q_a = a.q + (a.row0 + seg0 + row_a) * a.ldq +
                       (static_cast<int64_t>(kh) * G + g0 + e_a % heads_per_group) * D;
    const float* q_b = a.q + (a.row0 + seg0 + row_b) * a.ldq +
                       (static_cast<int64_t>(kh) * G + g0 + e_b % heads_per_group) * D;

    if constexpr (S::kQTerms) {
      // While the keys arrive: q's terms, the A fragments every warp reads.
      // The row kernel holds one row (tile_rows 1), so entry e is head
      // g0 + e, live while e < gn and the row has keys here; dead entries'
      // rows are zeros. Four elements a thread at a time.
      constexpr int kQuads = D / 4;
      const bool row_live = seg_rows > 0 && trow[0].count > 0;
      const float* q_row = a.q + (a.row0 + seg0) * a.ldq + (static_cast<int64_t>(kh) * G + g0) * D;
      for (int i = threadIdx.x; i < kEntryTile * kQuads; i += kMmaThreads) {
        const int e = i / kQuads, c = (i % kQuads) * 4;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row_live && e < gn) {
          const float* src = q_row + static_cast<int64_t>(e) * D + c;
          x = a.q_vec ? *reinterpret_cast<const float4*>(src) : make_float4(src[0], src[1], src[2], src[3]);
        }
        const Bf16Terms u0 = SplitBf16(x.x), u1 = SplitBf16(x.y), u2 = SplitBf16(x.z), u3 = SplitBf16(x.w);
        __nv_bfloat16* dst = qt + e * S::kKvStride + c;
        constexpr int kTerm = kEntryTile * S::kKvStride;
        *reinterpret_cast<uint2*>(dst) = make_uint2(PackBf16(u0.hi, u1.hi), PackBf16(u2.hi, u3.hi));
        *reinterpret_cast<uint2*>(dst + kTerm) = make_uint2(PackBf16(u0.mid, u1.mid), PackBf16(u2.mid, u3.mid));
        *reinterpret_cast<uint2*>(dst + 2 * kTerm) = make_uint2(PackBf16(u0.lo, u1.lo), PackBf16(u2.lo, u3.lo));
      }
    }
    if (SHARE) {
      CpAsyncWait<0>();
    } else {
      CpAsyncWait<1>();
    }
    __syncthreads();  // the keys are in (and q's terms)

    // 2. Scores of the warp's column tiles part * kScoreTiles ...
    if (part < S::kScoreParts) {
      constexpr int NT = S::kScoreTiles;
      const int nt0 = part * NT;
      float c1[NT][4], c2[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) c1[n][i] = 0.0f, c2[n][i] = 0.0f;
      // ldmatrix rows: lane l gives matrix l / 8's row l % 8: key tile
      // (l / 16), element half (l / 8) % 2.
      const __nv_bfloat16* krow = ks + ((nt0 + (lane >> 4)) * 8 + (lane & 7)) * S::kKvStride + ((lane >> 3) & 1) * 8;
      // The row kernel's A fragments from q's terms by ldmatrix: lane l
      // gives row l % 8 (+ 8 for matrices 1 and 3) and column half l / 16
      // of the 16 x 16 tile, the fragment order below.
      const __nv_bfloat16* qrow = qt + ((lane & 7) + ((lane >> 3) & 1) * 8) * S::kKvStride + (lane >> 4) * 8;
#pragma unroll 2
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t ah[4], am[4], al[4];
        if constexpr (S::kQTerms) {
          LdMatrixX4(ah, qrow + kc * 16);
          LdMatrixX4(am, qrow + kEntryTile * S::kKvStride + kc * 16);
          LdMatrixX4(al, qrow + 2 * kEntryTile * S::kKvStride + kc * 16);
        } else {
          const int c = kc * 16 + 2 * t;
          const float x[8] = {live_a ? q_a[c] : 0.0f,     live_a ? q_a[c + 1] : 0.0f, live_b ? q_b[c] : 0.0f,
                              live_b ? q_b[c + 1] : 0.0f, live_a ? q_a[c + 8] : 0.0f, live_a ? q_a[c + 9] : 0.0f,
                              live_b ? q_b[c + 8] : 0.0f, live_b ? q_b[c + 9] : 0.0f};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const Bf16Terms u = SplitBf16(x[2 * i]), v = SplitBf16(x[2 * i + 1]);
            ah[i] = PackBf16(u.hi, v.hi);
            am[i] = PackBf16(u.mid, v.mid);
            al[i] = PackBf16(u.lo, v.lo);
          }
        }
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          uint32_t b[4];
          LdMatrixX4(b, krow + n * 8 * S::kKvStride + kc * 16);
          const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          MmaBf16(c1[n], ah, b0);
          MmaBf16(c2[n], am, b0);
          MmaBf16(c2[n], al, b0);
          MmaBf16(c1[n + 1], ah, b1);
          MmaBf16(c2[n + 1], am, b1);
          MmaBf16(c2[n + 1], al, b1);
        }
      }
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int col = (nt0 + n) * 8 + 2 * t;
        sc[e_a * kScoreStride + col] = (c1[n][0] + c2[n][0]) * a.scale;
        sc[e_a * kScoreStride + col + 1] = (c1[n][1] + c2[n][1]) * a.scale;
        sc[e_b * kScoreStride + col] = (c1[n][2] + c2[n][2]) * a.scale;
        sc[e_b * kScoreStride + col + 1] = (c1[n][3] + c2[n][3]) * a.scale;
      }
    }
    __syncthreads();
    if (SHARE) load_values();  // every warp is done with the keys

    // 3. The softmax, one warp per entry; p as three bf16 terms.
    for (int e = warp; e < E; e += S::kWarps) {
      int row;
      const bool on = live(e, row);
      const MmaRow tr = on ? trow[row] : MmaRow{0, 0, 0};
      const bool in0 = lane >= tr.first && lane < tr.first + tr.count;
      const bool in1 = lane + 32 >= tr.first && lane + 32 < tr.first + tr.count;
      const float v0 = in0 ? sc[e * kScoreStride + lane] : -INFINITY;
      const float v1 = in1 ? sc[e * kScoreStride + lane + 32] : -INFINITY;
      const float m = WarpMax(fmaxf(v0, v1));
      const float p0 = in0 ? expf(v0 - m) : 0.0f;
      const float p1 = in1 ? expf(v1 - m) : 0.0f;
      const float l = WarpSum(p0 + p1);
      const Bf16Terms u = SplitBf16(p0), v = SplitBf16(p1);
      __nv_bfloat16* prow = pt + e * kPStride;
      prow[lane] = u.hi, prow[lane + 32] = v.hi;
      prow[E * kPStride + lane] = u.mid, prow[E * kPStride + lane + 32] = v.mid;
      prow[2 * E * kPStride + lane] = u.lo, prow[2 * E * kPStride + lane + 32] = v.lo;
      if (lane == 0) stats[e] = m, stats[E + e] = l;
    }
    CpAsyncWait<0>();
    __syncthreads();  // the values are in, p is written

    // 4. Values: the warp's column tiles of head elements, kValueBatch at a
    // time, every key chunk in order.
    {
      constexpr int NB = S::kValueBatch;
      const int vt0 = part * S::kValueTiles;
      // ldmatrix.trans rows: lane l gives key (l / 8) % 2 * 8 + l % 8 of the
      // chunk, element tile l / 16.
      const __nv_bfloat16* vrow = vs + (((lane >> 3) & 1) * 8 + (lane & 7)) * S::kKvStride + (lane >> 4) * 8;
      const uint32_t* p_a = reinterpret_cast<const uint32_t*>(pt + e_a * kPStride + 2 * t);
      const uint32_t* p_b = reinterpret_cast<const uint32_t*>(pt + e_b * kPStride + 2 * t);
      constexpr int kTermWords = E * kPStride / 2;
      for (int vb = 0; vb < S::kValueTiles; vb += NB) {
        float acc[NB][4];
#pragma unroll
        for (int n = 0; n < NB; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < kKeyChunks; ++kc) {
          uint32_t at[3][4];
#pragma unroll
          for (int term = 0; term < 3; ++term) {
            at[term][0] = p_a[term * kTermWords + kc * 8];
            at[term][1] = p_b[term * kTermWords + kc * 8];
            at[term][2] = p_a[term * kTermWords + kc * 8 + 4];
            at[term][3] = p_b[term * kTermWords + kc * 8 + 4];
          }
#pragma unroll
          for (int n = 0; n < NB; n += 2) {
            uint32_t b[4];
            LdMatrixX4Trans(b, vrow + kc * 16 * S::kKvStride + (vt0 + vb + n) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
#pragma unroll
            for (int term = 0; term < 3; ++term) MmaBf16(acc[n], at[term], b0);
#pragma unroll
            for (int term = 0; term < 3; ++term) MmaBf16(acc[n + 1], at[term], b1);
          }
        }
        float* out_a = live_a ? a.partial +
                                    (((seg0 + row_a) * a.kv_heads + kh) * a.splits_max + trow[row_a].split) * state +
                                    2 * G + static_cast<int64_t>(g0 + e_a % heads_per_group) * D
                              : nullptr;
        float* out_b = live_b ? a.partial +
                                    (((seg0 + row_b) * a.kv_heads + kh) * a.splits_max + trow[row_b].split) * state +
                                    2 * G + static_cast<int64_t>(g0 + e_b % heads_per_group) * D
                              : nullptr;
#pragma unroll
        for (int n = 0; n < NB; ++n) {
          const int col = (vt0 + vb + n) * 8 + 2 * t;
          if (live_a) *reinterpret_cast<float2*>(out_a + col) = make_float2(acc[n][0] + 0.0f, acc[n][1] + 0.0f);
          if (live_b) *reinterpret_cast<float2*>(out_b + col) = make_float2(acc[n][2] + 0.0f, acc[n][3] + 0.0f);
        }
      }
    }
    for (int e = threadIdx.x; e < E; e += kMmaThreads) {
      int row;
      if (!live(e, row)) continue;
      float* out = a.partial + (((seg0 + row) * a.kv_heads + kh) * a.splits_max + trow[row].split) * state;
      const int h = g0 + e % heads_per_group;
      out[h] = stats[e];
      out[G + h] = stats[E + e];
    }
  }
  if constexpr (EG == 1) {  // one row per block (tile_rows 1): t0 is the row
    static_assert(kSplitKeys * S::kKvStride * 2 >= kLastMergeScratchFloats * 4);
    if (a.merge_count != nullptr)
      MergeInLastBlock(a, t0, kh, g0, gn, a.merge_count + t0 * gridDim.y + blockIdx.y, reinterpret_cast<float*>(ks));
  }
}

// The kernel's measuring switches (see its start), read once per process.
struct WaitSwitches {
  bool early_wait, allow_early;
};
const WaitSwitches& Waits() {
  static const WaitSwitches w{!EnvSwitchOn("G4_CUDA_ATTN_LATE_WAIT"), EnvSwitchOn("G4_CUDA_ATTN_ALLOW")};
  return w;
}

template <int D, int EG, bool SHARE, bool QT = true, int W = kMmaWarps>
void Launch(const AttnParams& a, int64_t rows, cudaStream_t stream) {
  using S = MmaShape<D, EG, SHARE, QT, W>;
  const int heads_per_group = std::min(a.group, S::kEntries);
  const int head_groups = (a.group + heads_per_group - 1) / heads_per_group;
  // The row kernel takes one row per block; the run kernel as many rows as
  // fill its entries.
  const int tile_rows = EG == 1 ? 1 : S::kEntries / heads_per_group;
  int64_t splits = (a.max_kv_len + kSplitKeys - 1) / kSplitKeys;
  if (a.window > 0) splits = std::min<int64_t>(splits, (a.window - 1 + tile_rows - 1) / kSplitKeys + 2);
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  G4_CHECK_MSG(splits <= 65535 && tiles <= 65535 && static_cast<int64_t>(a.kv_heads) * head_groups <= 65535,
               "[cuda] PagedAttention: tensor-core launch too large");
  // A function of (D, EG) alone: raised once (outside any capture: the
  // first call of a shape runs before its recording).
  static const bool raised = [] {
    G4_CUDA_CHECK(cudaFuncSetAttribute(MmaKernel<D, EG, SHARE, QT, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(S::kBytes)));
    return true;
  }();
  (void)raised;
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.kv_heads * head_groups),
                  static_cast<unsigned>(tiles));
  LaunchDependent(MmaKernel<D, EG, SHARE, QT, W>, grid, dim3(S::kThreads), S::kBytes, stream, a, tile_rows,
                  heads_per_group, head_groups, rows, Waits().early_wait, Waits().allow_early);
}

// The head sizes the kernels take, as template arguments (8 warps only
// from 128: at 64 a warp would hold one value column tile).
template <int EG, bool QT, int W>
void LaunchDim(const AttnParams& a, int64_t rows, cudaStream_t stream) {
  switch (a.d) {
    case 64:
      if constexpr (W == kMmaWarps) return Launch<64, EG, false, QT, W>(a, rows, stream);
      break;
    case 128:
      return Launch<128, EG, false, QT, W>(a, rows, stream);
    case 256:
      return Launch<256, EG, false, QT, W>(a, rows, stream);
    default:
      return Launch<512, EG, false, QT, W>(a, rows, stream);
  }
  G4_CHECK_MSG(false, "[cuda] PagedAttention: 8 warps at head_dim 64");
}

template <int EG>
void LaunchEg(const AttnParams& a, int64_t rows, cudaStream_t stream) {
  // Measuring switch (G4_CUDA_ATTN_MMA_SHARE=1): one buffer for keys and
  // values at head_dim 512.
  if (const char* e = std::getenv("G4_CUDA_ATTN_MMA_SHARE"); a.d == 512 && e != nullptr && std::strcmp(e, "1") == 0)
    return Launch<512, EG, true>(a, rows, stream);
  if constexpr (EG == 1) {
    // Measuring switches: G4_CUDA_ATTN_QTERMS=0, the row kernel's warps each
    // load and split q themselves (and 4 warps); G4_CUDA_ATTN_WIDE_ROW=0, 4
    // warps at head_dim 128 and more.
    static const bool q_terms = EnvSwitchOn("G4_CUDA_ATTN_QTERMS");
    static const bool wide_row = EnvSwitchOn("G4_CUDA_ATTN_WIDE_ROW");
    if (!q_terms) return LaunchDim<EG, false, kMmaWarps>(a, rows, stream);
    if (wide_row && a.d >= 128) return LaunchDim<EG, true, 8>(a, rows, stream);
  }
  return LaunchDim<EG, true, kMmaWarps>(a, rows, stream);
}

}  // namespace

bool MmaModeOn() {
  const char* e = std::getenv("G4_CUDA_ATTN_MMA");
  if (e == nullptr || *e == '\0') return kMmaByDefault;
  return std::strcmp(e, "0") != 0;
}

bool MmaStorable(const AttnStore& st, int d) {
  return st.records != nullptr && st.vec && st.f.kind == kKvPlain && st.f.plain_bytes == 2 && st.f.plain_bf16 &&
         (d == 64 || d == 128 || d == 256 || d == 512);
}

void LaunchMma(const AttnParams& a, bool runs, int64_t rows, cudaStream_t stream) {
  if (runs) return LaunchEg<4>(a, rows, stream);
  return LaunchEg<1>(a, rows, stream);
}

}  // namespace g4::cuda::attn
