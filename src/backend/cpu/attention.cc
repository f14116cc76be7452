// Scaled dot-product attention with GQA and position masks (contract:
// backend/ops.h AttentionArgs), by online softmax over blocks of keys, so
// memory stays O(head_dim) per query head whatever the number of keys.
//
// The query heads that share a KV head are processed together, so each key
// and value row is read once per (query, KV head). With few such pairs
// (decode: one query) the keys are split into ranges handled in parallel and
// merged with the usual log-sum-exp rescaling.
//
// A query that sees no key at all (impossible in the Gemma graph, where a
// query always sees at least itself) gets an all-zero output, never NaN.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/vec_math.h"

namespace g4::cpu {
namespace {

constexpr int kBlock = 32;                 // keys scored at once (their values stay in L1)
constexpr int64_t kMinKeysPerSplit = 256;  // below this a split is not worth a merge

// Softmax state for the G query heads of one (query, KV head) pair.
struct State {
  float* m;    // [G] running max of scores
  float* l;    // [G] running sum of exp(score - m)
  float* acc;  // [G, D] running sum of exp(score - m) * v
};

// acc[0..d) = acc * c + p * v (c == 1 skips the rescale).
inline void Axpy(float* acc, float p, const float* v, int d) {
  const VF vp = VSet1(p);
  int i = 0;
  for (; i + kLanes <= d; i += kLanes) VStore(acc + i, VFma(vp, VLoad(v + i), VLoad(acc + i)));
  if (i < d) {
    const int n = d - i;
    VStoreN(acc + i, VFma(vp, VLoadN(v + i, n), VLoadN(acc + i, n)), n);
  }
}

inline void ScaleInPlace(float* a, float c, int d) {
  const VF vc = VSet1(c);
  int i = 0;
  for (; i + kLanes <= d; i += kLanes) VStore(a + i, VMul(VLoad(a + i), vc));
  if (i < d) VStoreN(a + i, VMul(VLoadN(a + i, d - i), vc), d - i);
}

// out[r] = q . k_r over d, for four key rows at once (q loaded once; two
// chains per key so the FMAs are not latency-bound).
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

// Vectors of head_dim kept in registers while a block of values is folded in.
constexpr int kSlice = 8;

// acc[0, S * kLanes) += sum_t p[t] * rows[t][off, off + S * kLanes), or only
// the first `tail` floats of the last vector when tail > 0.
template <int S>
inline void AccumulateValues(float* acc, const float* p, const float* const* rows, int64_t off, int count,
                             int tail) {
  VF a[S];
  for (int s = 0; s < S; ++s) a[s] = (tail && s == S - 1) ? VLoadN(acc + s * kLanes, tail) : VLoad(acc + s * kLanes);
  for (int t = 0; t < count; ++t) {
    const VF pv = VSet1(p[t]);
    for (int s = 0; s < S; ++s) {
      const float* r = rows[t] + off + s * kLanes;
      const VF v = (tail && s == S - 1) ? VLoadN(r, tail) : VLoad(r);
      a[s] = VFma(pv, v, a[s]);
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

// Folds keys [j_begin, j_end) into st for query i and KV head kh.
void AttendRange(const AttentionArgs& a, int64_t i, int kh, int64_t j_begin, int64_t j_end,
                 const State& st, float* scores) {
  const int group = a.num_heads / a.num_kv_heads;
  const int d = a.head_dim;
  const int64_t qp = a.q_pos[i];
  const int64_t lowest = a.window > 0 ? qp - a.window : std::numeric_limits<int64_t>::min();
  const float* q = a.q + (i * a.num_heads + static_cast<int64_t>(kh) * group) * d;
  const float* k = a.k + static_cast<int64_t>(kh) * d;
  const float* v = a.v + static_cast<int64_t>(kh) * d;
  int64_t idx[kBlock];
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kBlock) {
    const int64_t j1 = std::min(j_end, j0 + kBlock);
    int nv = 0;
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t kp = a.k_pos[j];
      if (kp <= qp && kp > lowest) idx[nv++] = j;
    }
    if (nv == 0) continue;
    for (int g = 0; g < group; ++g) {
      float* s = scores + g * kBlock;
      const float* qg = q + static_cast<int64_t>(g) * d;
      int t = 0;
      for (; t + 4 <= nv; t += 4) {
        const float* rows[4] = {k + idx[t] * a.kv_stride, k + idx[t + 1] * a.kv_stride,
                                k + idx[t + 2] * a.kv_stride, k + idx[t + 3] * a.kv_stride};
        Dot4(qg, rows, d, s + t);
      }
      for (; t < nv; ++t) s[t] = VDot(qg, k + idx[t] * a.kv_stride, d);
      // Scale, then pad to whole vectors with -inf for the maximum.
      const VF vscale = VSet1(a.scale);
      for (t = 0; t < nv; t += kLanes) {
        const int n = std::min(kLanes, nv - t);
        VStoreN(s + t, VMul(VLoadN(s + t, n), vscale), n);
      }
      const int padded = (nv + kLanes - 1) / kLanes * kLanes;
      std::fill(s + nv, s + padded, -std::numeric_limits<float>::infinity());
      VF vmax = VLoad(s);
      for (t = kLanes; t < padded; t += kLanes) vmax = VMax(vmax, VLoad(s + t));
      const float block_max = VReduceMax(vmax);
      const float m_new = std::max(st.m[g], block_max);
      if (m_new > st.m[g]) {
        const float c = std::exp(st.m[g] - m_new);  // 0 on the first block (m = -inf)
        st.l[g] *= c;
        ScaleInPlace(st.acc + static_cast<int64_t>(g) * d, c, d);
        st.m[g] = m_new;
      }
      const VF vm = VSet1(m_new);
      for (int t = 0; t < nv; t += kLanes) {
        const int n = std::min(kLanes, nv - t);
        VStoreN(s + t, VExp(VSub(VLoadN(s + t, n), vm)), n);
      }
      float l_add = 0;
      for (int t = 0; t < nv; ++t) l_add += s[t];
      st.l[g] += l_add;
    }
    // Values: per slice of head_dim, each head's accumulator slice stays in
    // registers across the whole block (the slice of the block's value rows
    // stays in L1 across heads).
    const float* rows[kBlock];
    for (int t = 0; t < nv; ++t) rows[t] = v + idx[t] * a.kv_stride;
    for (int x = 0; x < d; x += kSlice * kLanes) {
      const int left = d - x;
      for (int g = 0; g < group; ++g) {
        float* acc = st.acc + static_cast<int64_t>(g) * d + x;
        const float* p = scores + g * kBlock;
        if (left >= kSlice * kLanes) {
          AccumulateValues<kSlice>(acc, p, rows, x, nv, 0);
        } else {
          // Odd head_dim tail: one vector at a time.
          for (int y = 0; y < left; y += kLanes) {
            const int n = std::min(kLanes, left - y);
            AccumulateValues<1>(acc + y, p, rows, x + y, nv, n == kLanes ? 0 : n);
          }
        }
      }
    }
  }
}

void Finish(const State& st, int group, int d, float* out) {
  for (int g = 0; g < group; ++g) {
    float* o = out + static_cast<int64_t>(g) * d;
    const float* acc = st.acc + static_cast<int64_t>(g) * d;
    const float inv = st.l[g] > 0 ? 1.0f / st.l[g] : 0.0f;
    for (int x = 0; x < d; ++x) o[x] = acc[x] * inv;
  }
}

}  // namespace

void Attention(const AttentionArgs& a) {
  const int group = a.num_heads / a.num_kv_heads;
  const int d = a.head_dim;
  const int64_t pairs = a.num_queries * a.num_kv_heads;
  const int64_t threads = omp_get_max_threads();
  int64_t splits = 1;
  if (pairs < 2 * threads) {
    splits = std::min((2 * threads + pairs - 1) / pairs, (a.num_keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
    splits = std::max<int64_t>(splits, 1);
  }
  const int64_t keys_per_split = (a.num_keys + splits - 1) / splits;
  const int64_t state_floats = group * (2 + static_cast<int64_t>(d));
  // Per-split states, merged afterwards; unused when splits == 1.
  std::vector<float> partial(splits > 1 ? pairs * splits * state_floats : 0);

#pragma omp parallel if (pairs * splits > 1 && a.num_keys * pairs >= 64)
  {
    float* scratch = ThreadScratch(ScratchSlot::kAttention, state_floats + group * kBlock);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < pairs * splits; ++task) {
      const int64_t pair = task / splits, sp = task % splits;
      const int64_t i = pair / a.num_kv_heads;
      const int kh = static_cast<int>(pair % a.num_kv_heads);
      float* base = splits > 1 ? partial.data() + task * state_floats : scratch;
      State st{base, base + group, base + 2 * group};
      std::fill(st.m, st.m + group, -std::numeric_limits<float>::infinity());
      std::fill(st.l, st.l + group, 0.0f);
      std::fill(st.acc, st.acc + group * static_cast<int64_t>(d), 0.0f);
      const int64_t j_begin = sp * keys_per_split;
      const int64_t j_end = std::min(a.num_keys, j_begin + keys_per_split);
      AttendRange(a, i, kh, j_begin, j_end, st, scratch + state_floats);
      if (splits == 1) Finish(st, group, d, a.out + (i * a.num_heads + static_cast<int64_t>(kh) * group) * d);
    }
  }
  if (splits == 1) return;

  // Merge: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
#pragma omp parallel for schedule(static) if (pairs > 1)
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t i = pair / a.num_kv_heads;
    const int kh = static_cast<int>(pair % a.num_kv_heads);
    float* out = a.out + (i * a.num_heads + static_cast<int64_t>(kh) * group) * d;
    for (int g = 0; g < group; ++g) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t sp = 0; sp < splits; ++sp) m = std::max(m, partial[(pair * splits + sp) * state_floats + g]);
      float* o = out + static_cast<int64_t>(g) * d;
      std::fill(o, o + d, 0.0f);
      float l = 0;
      if (m != -std::numeric_limits<float>::infinity()) {
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* base = partial.data() + (pair * splits + sp) * state_floats;
          if (base[g] == -std::numeric_limits<float>::infinity()) continue;
          const float c = std::exp(base[g] - m);
          l += base[group + g] * c;
          Axpy(o, c, base + 2 * group + static_cast<int64_t>(g) * d, d);
        }
      }
      ScaleInPlace(o, l > 0 ? 1.0f / l : 0.0f, d);
    }
  }
}

}  // namespace g4::cpu
