// cpu::PagedAttention (contract: backend/ops.h PagedAttentionArgs): scaled
// dot-product attention of every step row over its own sequence's keys,
// read from block tables in any record format (kv_head_decode.h).
//
// The order of the arithmetic is fixed by the row alone. A row at position p
// sees the keys lo..p (lo = 0, or p - window + 1 with a window); that range
// is cut into splits of kSplitKeys keys counted from lo, each split is folded
// in ascending position in tiles of kTileKeys keys with online softmax from
// a fresh state, and the splits are merged by log-sum-exp in split order.
// Neither the number of rows in the step, nor their order, nor the number of
// threads changes any of this; the work is spread over (row, KV head, split)
// items (and, when there are fewer items than threads, over slices of an
// item's query heads), which only decides who computes a split, never how. So a sequence's
// rows give the same bits alone or in any batch, and chunked prefill equals
// one pass equals decode. (As for MatMul, the bits do depend on the build's
// vector width, simd.h.)
//
// Per tile (the tricks of the dense kernel): every key and value of a KV
// head is decoded once and shared by the query heads of its group; scores
// take four keys at a time; value rows are accumulated slice by slice with
// the accumulators in registers across the tile.
//
// Turbo stores keep values in the rotated domain: a row's merged output for
// each query head is rotated back once, at the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kv_head_decode.h"
#include "backend/cpu/kv_kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/vec_math.h"
#include "backend/kv_formats.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

constexpr int kTileKeys = 32;        // keys scored, then accumulated, at once
constexpr int64_t kSplitKeys = 512;  // keys per split (log-sum-exp merged)
// Below this many (visible key x KV head) pairs in the whole step, one
// thread. Low enough that a decode step of a model with one KV head (E2B:
// eight query heads of 256 dimensions per key) is shared out from 128 keys
// on (at 4096 a 2000-key decode had run on one thread whatever -t said).
constexpr int64_t kMinParallelWork = 128;
// Partial states kept at once (floats); rows are processed in groups that fit.
constexpr int64_t kPartialBudget = int64_t{1} << 21;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline void Axpy(float* acc, float p, const float* v, int d) {
  const VF vp = VSet1(p);
  int i = 0;
  for (; i + kLanes <= d; i += kLanes) VStore(acc + i, VFma(vp, VLoad(v + i), VLoad(acc + i)));
  if (i < d) VStoreN(acc + i, VFma(vp, VLoadN(v + i, d - i), VLoadN(acc + i, d - i)), d - i);
}

inline void ScaleInPlace(float* a, float c, int d) {
  const VF vc = VSet1(c);
  int i = 0;
  for (; i + kLanes <= d; i += kLanes) VStore(a + i, VMul(VLoad(a + i), vc));
  if (i < d) VStoreN(a + i, VMul(VLoadN(a + i, d - i), vc), d - i);
}

// out[r] = q . k_r for four key rows (q loaded once, two chains per key).
inline void Dot4(const float* q, const float* const* k, int d, float* out) {
  VF a[4][2];
  for (int r = 0; r < 4; ++r) a[r][0] = a[r][1] = VZero();
  int x = 0;
  for (; x + 2 * kLanes <= d; x += 2 * kLanes) {
    const VF q0 = VLoad(q + x), q1 = VLoad(q + x + kLanes);
    for (int r = 0; r < 4; ++r) {
      a[r][0] = VFma(q0, VLoad(k[r] + x), a[r][0]);
      a[r][1] = VFma(q1, VLoad(k[r] + x + kLanes), a[r][1]);
    }
  }
  for (; x < d; x += kLanes) {
    const int n = std::min(kLanes, d - x);
    const VF qv = VLoadN(q + x, n);
    for (int r = 0; r < 4; ++r) a[r][0] = VFma(qv, VLoadN(k[r] + x, n), a[r][0]);
  }
  for (int r = 0; r < 4; ++r) out[r] = VReduceAdd(VAdd(a[r][0], a[r][1]));
}

// Vectors of head_dim kept in registers while a tile of values is folded in.
constexpr int kSlice = 8;

// acc[0, S kLanes) += sum_t p[t] rows[t][off, off + S kLanes), or only the
// first `tail` floats of the last vector when tail > 0.
template <int S>
inline void AccumulateValues(float* acc, const float* p, const float* const* rows, int64_t off, int count,
                             int tail) {
  VF a[S];
  for (int s = 0; s < S; ++s)
    a[s] = (tail && s == S - 1) ? VLoadN(acc + s * kLanes, tail) : VLoad(acc + s * kLanes);
  for (int t = 0; t < count; ++t) {
    const VF pv = VSet1(p[t]);
    for (int s = 0; s < S; ++s) {
      const float* r = rows[t] + off + s * kLanes;
      a[s] = VFma(pv, (tail && s == S - 1) ? VLoadN(r, tail) : VLoad(r), a[s]);
    }
  }
  for (int s = 0; s < S; ++s) {
    if (tail && s == S - 1) {
      VStoreN(acc + s * kLanes, a[s], tail);
    } else {
      VStore(acc + s * kLanes, a[s]);
    }
  }
}

// One step row as the kernel needs it.
struct RowPlan {
  int32_t seq = 0;
  int32_t pos = 0;
  int32_t first_key = 0;  // lo
  int32_t splits = 0;
  int store = 0;
  int64_t first_item = 0;  // of this row's (kv head, split) items, within its row group
};

struct Setup {
  const PagedAttentionArgs* a = nullptr;
  KvHeadDecoder decoder[2];
  int group = 0;  // query heads per KV head
  int d = 0;
  int64_t state_floats = 0;  // m [group], l [group], acc [group, d]
};

// Walks the records of one sequence in ascending position from `j`,
// entering each block (and checking its table entry) on first use.
class RecordCursor {
 public:
  RecordCursor(const Setup& su, int st, int32_t seq, int64_t j)
      : kv_(su.a->kv),
        store_(kv_.store[st]),
        table_(kv_.tables.block_table + seq * kv_.tables.table_stride),
        entry_(j / kv_.block_size),
        slot_(static_cast<int>(j % kv_.block_size)) {}

  const uint8_t* Next() {
    if (!block_) {
      G4_CHECK_MSG(entry_ < kv_.tables.table_stride, "[cpu] PagedAttention: key past the block table");
      const int32_t block = table_[entry_];
      G4_CHECK_MSG(block >= 0 && block < store_.num_blocks,
                   "[cpu] PagedAttention: visible key in a missing block");
      block_ = store_.records + block * static_cast<int64_t>(kv_.block_size) * store_.format.record_bytes;
    }
    const uint8_t* r = block_ + slot_ * store_.format.record_bytes;
    if (++slot_ == kv_.block_size) {
      slot_ = 0;
      ++entry_;
      block_ = nullptr;
    }
    return r;
  }

 private:
  const PagedKv& kv_;
  const PagedKvStore& store_;
  const int32_t* table_;
  int64_t entry_;
  int slot_;
  const uint8_t* block_ = nullptr;
};

// Folds keys [k_begin, k_end) of row `row` and KV head kh into the fresh
// state `st`, tile by tile, for the query heads [g0, g1) of the KV head's
// group (each query head's arithmetic is its own: slicing the group only
// decides who computes it). `scratch`: scores [group, kTileKeys] then key
// and value buffers [kTileKeys, d] each.
void FoldSplit(const Setup& su, const RowPlan& rp, int64_t row, int kh, int64_t k_begin, int64_t k_end, int g0,
               int g1, float* st, float* scratch) {
  const PagedAttentionArgs& a = *su.a;
  const KvHeadDecoder& dec = su.decoder[rp.store];
  const int group = su.group, d = su.d;
  float* m = st;
  float* l = st + group;
  float* acc = st + 2 * group;
  std::fill(m + g0, m + g1, kNegInf);
  std::fill(l + g0, l + g1, 0.0f);
  std::fill(acc + static_cast<int64_t>(g0) * d, acc + static_cast<int64_t>(g1) * d, 0.0f);
  float* scores = scratch;
  float* kbuf = scores + group * kTileKeys;
  float* vbuf = kbuf + static_cast<int64_t>(kTileKeys) * d;
  const float* q = static_cast<const float*>(a.q.at(row, static_cast<int64_t>(kh) * group * d));
  const uint8_t* rec[kTileKeys];
  const uint8_t* next[kTileKeys];
  const float* rows[kTileKeys];
  // Records of the tile after the current one are located (and prefetched)
  // one tile ahead.
  RecordCursor cursor(su, rp.store, rp.seq, k_begin);
  auto locate = [&](int64_t j0, const uint8_t** out) {
    const int n = static_cast<int>(std::min<int64_t>(kTileKeys, k_end - j0));
    for (int t = 0; t < n; ++t) out[t] = cursor.Next();
    return n;
  };
  int n_next = locate(k_begin, next);
  for (int t = 0; t < n_next; ++t) dec.PrefetchKey(next[t], kh);
  for (int64_t j0 = k_begin; j0 < k_end; j0 += kTileKeys) {
    const int nt = n_next;
    std::copy(next, next + nt, rec);
    n_next = j0 + kTileKeys < k_end ? locate(j0 + kTileKeys, next) : 0;
    // Each key decoded asks for the next tile's key at the same index, each
    // value for the next tile's value: prefetches spread over the tile.
    for (int t = 0; t < nt; ++t) {
      if (t < n_next) dec.PrefetchKey(next[t], kh);
      dec.PrefetchValue(rec[t], kh);
      rows[t] = dec.key(dec, rec[t], kh, kbuf + static_cast<int64_t>(t) * d);
    }
    for (int g = g0; g < g1; ++g) {
      float* s = scores + g * kTileKeys;
      const float* qg = q + static_cast<int64_t>(g) * d;
      int t = 0;
      for (; t + 4 <= nt; t += 4) Dot4(qg, rows + t, d, s + t);
      for (; t < nt; ++t) s[t] = VDot(qg, rows[t], d);
      const VF vscale = VSet1(a.scale);
      for (t = 0; t < nt; t += kLanes) {
        const int n = std::min(kLanes, nt - t);
        VStoreN(s + t, VMul(VLoadN(s + t, n), vscale), n);
      }
      float tile_max = kNegInf;
      for (t = 0; t < nt; ++t) tile_max = std::max(tile_max, s[t]);
      const float m_new = std::max(m[g], tile_max);
      if (m_new > m[g]) {
        const float c = std::exp(m[g] - m_new);  // 0 on the first tile (m = -inf)
        l[g] *= c;
        ScaleInPlace(acc + static_cast<int64_t>(g) * d, c, d);
        m[g] = m_new;
      }
      const VF vm = VSet1(m_new);
      for (t = 0; t < nt; t += kLanes) {
        const int n = std::min(kLanes, nt - t);
        VStoreN(s + t, VExp(VSub(VLoadN(s + t, n), vm)), n);
      }
      float l_add = 0;
      for (t = 0; t < nt; ++t) l_add += s[t];
      l[g] += l_add;
    }
    for (int t = 0; t < nt; ++t) rows[t] = dec.value(dec, rec[t], kh, vbuf + static_cast<int64_t>(t) * d);
    for (int x = 0; x < d; x += kSlice * kLanes) {
      const int left = d - x;
      for (int g = g0; g < g1; ++g) {
        float* ag = acc + static_cast<int64_t>(g) * d + x;
        const float* p = scores + g * kTileKeys;
        if (left >= kSlice * kLanes) {
          AccumulateValues<kSlice>(ag, p, rows, x, nt, 0);
        } else {
          for (int y = 0; y < left; y += kLanes) {
            const int n = std::min(kLanes, left - y);
            AccumulateValues<1>(ag + y, p, rows, x + y, nt, n == kLanes ? 0 : n);
          }
        }
      }
    }
  }
}

// out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M) over the row's
// splits in order, then the inverse value rotation for turbo stores.
void MergeSplits(const Setup& su, const RowPlan& rp, int64_t row, int kh, const float* partial) {
  const PagedAttentionArgs& a = *su.a;
  const int group = su.group, d = su.d;
  for (int g = 0; g < group; ++g) {
    float mx = kNegInf;
    for (int sp = 0; sp < rp.splits; ++sp) mx = std::max(mx, partial[sp * su.state_floats + g]);
    float* o = static_cast<float*>(a.out.at(row, (static_cast<int64_t>(kh) * group + g) * d));
    std::fill(o, o + d, 0.0f);
    float l = 0;
    for (int sp = 0; sp < rp.splits; ++sp) {
      const float* base = partial + sp * su.state_floats;
      if (base[g] == kNegInf) continue;
      const float c = std::exp(base[g] - mx);
      l += base[group + g] * c;
      Axpy(o, c, base + 2 * group + static_cast<int64_t>(g) * d, d);
    }
    ScaleInPlace(o, l > 0 ? 1.0f / l : 0.0f, d);
    if (su.decoder[rp.store].rotated_values) kvfmt::RotateInverse(o, d, a.kv.store[rp.store].value_signs);
  }
}

// Split states of the current row group, owned by the thread calling the op.
std::vector<float>& CallerPartials() {
  thread_local std::vector<float> partial;
  return partial;
}

float* WorkerScratch(size_t n) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

void CheckStore(const PagedAttentionArgs& a, const PagedKvStore& s) {
  G4_CHECK_MSG(s.records != nullptr && s.num_blocks > 0, "[cpu] PagedAttention: store without blocks");
  G4_CHECK_MSG(!s.format.rotates_values() || (s.value_centroids && s.value_signs),
               "[cpu] PagedAttention: turbo store without its codebook and signs");
  G4_CHECK_MSG(s.format.num_kv_heads == a.num_kv_heads && s.format.head_dim == a.head_dim,
               "[cpu] PagedAttention: store geometry differs from the attention's");
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a) {
  const StepRows& rows = a.rows;
  G4_CHECK(a.num_heads > 0 && a.num_kv_heads > 0 && a.head_dim > 0 && a.window >= 0);
  G4_CHECK_MSG(a.num_heads % a.num_kv_heads == 0, "[cpu] PagedAttention: heads not a multiple of KV heads");
  const int64_t width = static_cast<int64_t>(a.num_heads) * a.head_dim;
  G4_CHECK_MSG(a.q.dtype == DType::kF32 && a.out.dtype == DType::kF32 && a.q.cols == width &&
                   a.out.cols == width && a.q.rows >= rows.num_rows && a.out.rows >= rows.num_rows,
               "[cpu] PagedAttention: q/out shape");
  G4_CHECK_MSG(a.q.data != a.out.data || rows.num_rows == 0, "[cpu] PagedAttention: out aliases q");
  G4_CHECK_MSG(a.kv.block_size > 0, "[cpu] PagedAttention: block size");
  if (rows.num_rows == 0) return;

  Setup su;
  su.a = &a;
  su.group = a.num_heads / a.num_kv_heads;
  su.d = a.head_dim;
  su.state_floats = su.group * (2 + static_cast<int64_t>(su.d));
  bool uses[2] = {false, false};

  // Plan every row: its sequence, store, visible range and split count.
  thread_local std::vector<RowPlan> plan_buffer;  // reused: no allocation per call once warm
  plan_buffer.resize(rows.num_rows);
  std::vector<RowPlan>& plan = plan_buffer;
  int64_t work = 0;
  for (int64_t r = 0; r < rows.num_rows; ++r) {
    RowPlan& rp = plan[r];
    rp.seq = rows.row_seq[r];
    G4_CHECK_MSG(rp.seq >= 0 && rp.seq < rows.num_seqs, "[cpu] PagedAttention: row sequence out of range");
    rp.pos = rows.positions[r];
    G4_CHECK_MSG(rp.pos >= 0 && rp.pos < rows.kv_len[rp.seq],
                 "[cpu] PagedAttention: row position past kv_len");
    rp.store = a.kv.tables.seq_store ? a.kv.tables.seq_store[rp.seq] : 0;
    G4_CHECK_MSG(rp.store == 0 || rp.store == 1, "[cpu] PagedAttention: store must be 0 or 1");
    uses[rp.store] = true;
    rp.first_key = a.window > 0 ? std::max<int32_t>(0, rp.pos - a.window + 1) : 0;
    const int64_t visible = rp.pos - rp.first_key + 1;
    rp.splits = static_cast<int32_t>((visible + kSplitKeys - 1) / kSplitKeys);
    work += visible;
  }
  for (int st = 0; st < 2; ++st) {
    if (!uses[st]) continue;
    CheckStore(a, a.kv.store[st]);
    su.decoder[st] = MakeKvHeadDecoder(a.kv.store[st].format, a.kv.store[st].value_centroids);
  }
  work *= a.num_kv_heads;

  const size_t scratch_floats =
      static_cast<size_t>(su.group) * kTileKeys + 2 * static_cast<size_t>(kTileKeys) * su.d;
  const int64_t item_floats = su.state_floats;
  std::vector<float>& partial = CallerPartials();
  const int members = work >= kMinParallelWork ? TeamSize() : 1;

  for (int64_t r0 = 0; r0 < rows.num_rows;) {
    // Rows whose partial states fit the budget (at least one row).
    int64_t items = 0, r1 = r0;
    for (; r1 < rows.num_rows; ++r1) {
      const int64_t add = static_cast<int64_t>(plan[r1].splits) * a.num_kv_heads;
      if (r1 > r0 && (items + add) * item_floats > kPartialBudget) break;
      plan[r1].first_item = items;
      items += add;
    }
    if (partial.size() < static_cast<size_t>(items * item_floats)) partial.resize(items * item_floats);
    // A row's items: KV head major, split minor. With fewer items than
    // members (a decode row of a one-KV-head model within one split), each
    // item's query heads are shared out in `slices` parts.
    const int slices = members > 1 && items < members ? static_cast<int>(std::min<int64_t>(
                                                            su.group, (members + items - 1) / items))
                                                      : 1;
    ParallelForDynamic(items * slices, members, [&](int64_t sliced) {
      const int64_t it = sliced / slices;
      const int slice = static_cast<int>(sliced % slices);
      const int g0 = slice * su.group / slices, g1 = (slice + 1) * su.group / slices;
      float* scratch = WorkerScratch(scratch_floats);
      int64_t lo = r0, hi = r1 - 1;  // the row holding item `it`
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (plan[mid].first_item <= it) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      const RowPlan& rp = plan[lo];
      const int64_t local = it - rp.first_item;
      const int kh = static_cast<int>(local / rp.splits);
      const int64_t k_begin = rp.first_key + (local % rp.splits) * kSplitKeys;
      const int64_t k_end = std::min<int64_t>(rp.pos + 1, k_begin + kSplitKeys);
      FoldSplit(su, rp, lo, kh, k_begin, k_end, g0, g1, partial.data() + it * item_floats, scratch);
    });
    const int64_t pairs = (r1 - r0) * a.num_kv_heads;
    ParallelFor(pairs, members > 1 ? 1 : pairs, [&](int64_t p0, int64_t p1) {
      for (int64_t pair = p0; pair < p1; ++pair) {
        const int64_t r = r0 + pair / a.num_kv_heads;
        const int kh = static_cast<int>(pair % a.num_kv_heads);
        const RowPlan& rp = plan[r];
        MergeSplits(su, rp, r, kh,
                    partial.data() + (rp.first_item + static_cast<int64_t>(kh) * rp.splits) * item_floats);
      }
    });
    r0 = r1;
  }
}

G4_CPU_END
