// The host kernel shared by the KV-cache attention ops (Ops::AttentionPlainKv,
// AttentionAffineKv, AttentionTurboKv): online softmax over blocks of keys,
// the query heads of one KV head together, and for decode (few (query, KV
// head) pairs) the keys split into ranges merged by log-sum-exp, as in
// attention.cc. Unlike there, blocks and splits are formed from the keys a
// query can see, taken in the EncodedKv's logical order, so the arithmetic
// never depends on masked keys or on the layout (ring or unbounded).
//
// A Reader knows one record format. Keys are scored on their codes: for a
// group with step s and offset term o (x = s c + o),
//   q . x = s (q . c) + o sum(q),
// so only the integer codes are widened to float and each group costs one
// dot product plus one multiply-add (plain records skip both: kUnitScale).
// Values are decoded once per key and KV head into a float row shared by the
// query heads of the group.
//
//   struct Reader {
//     static constexpr bool kUnitScale;                      // step 1, offset 0
//     int group;                                             // elements per scale
//     const float* Key(const uint8_t* rec, int kh, float* buf, float* step, float* offset) const;
//     const float* Value(const uint8_t* rec, int kh, float* buf) const;
//   };
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/simd.h"
#include "backend/cpu/vec_math.h"
#include "backend/ops.h"
#include "core/check.h"

namespace g4::cpu::kvattn {

constexpr int kBlock = 64;
constexpr int64_t kMinKeysPerSplit = 256;

inline void AxpyRow(float* acc, float p, const float* v, int d) {
  const VF vp = VSet1(p);
  int i = 0;
  for (; i + kLanes <= d; i += kLanes) VStore(acc + i, VFma(vp, VLoad(v + i), VLoad(acc + i)));
  if (i < d) VStoreN(acc + i, VFma(vp, VLoadN(v + i, d - i), VLoadN(acc + i, d - i)), d - i);
}

inline void ScaleRow(float* a, float c, int d) {
  for (int i = 0; i < d; ++i) a[i] *= c;
}

inline float* Scratch(size_t n) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

template <class Reader>
void EncodedAttention(const AttentionArgs& a, const EncodedKv& kv, const Reader& reader) {
  G4_CHECK_MSG(a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0,
               "[cpu] KV attention: heads not a multiple of KV heads");
  G4_CHECK_MSG(a.head_dim % reader.group == 0, "[cpu] KV attention: head_dim not whole groups");
  G4_CHECK_MSG(kv.num_keys == 0 || (kv.first >= 0 && kv.first < kv.num_keys), "[cpu] KV attention: bad first key");
  const int group = a.num_heads / a.num_kv_heads;
  const int d = a.head_dim;
  const int ng = d / reader.group;
  const int64_t nk = kv.num_keys;
  const int64_t pairs = a.num_queries * a.num_kv_heads;
  auto slot = [&](int64_t j) { const int64_t s = kv.first + j; return s >= nk ? s - nk : s; };
  auto sees = [&](int64_t qp, int64_t kp) { return kp <= qp && (a.window <= 0 || kp > qp - a.window); };
  // Splits come from the number of visible keys, never from num_keys.
  const int64_t threads = omp_get_max_threads();
  int64_t splits = 1;
  std::vector<int64_t> visible(a.num_queries, 0);
  if (pairs < 2 * threads) {
    int64_t most = 0;
    for (int64_t i = 0; i < a.num_queries; ++i) {
      for (int64_t j = 0; j < nk; ++j) visible[i] += sees(a.q_pos[i], kv.pos[j]);
      most = std::max(most, visible[i]);
    }
    splits = std::min((2 * threads + pairs - 1) / pairs, (most + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
    splits = std::max<int64_t>(splits, 1);
  }
  const int64_t state_floats = group * (2 + static_cast<int64_t>(d));
  std::vector<float> partial(splits > 1 ? pairs * splits * state_floats : 0);
  // Per thread: state, scores [group, kBlock], key and value rows [d], steps
  // and offsets [ng], query group sums [group, ng].
  const size_t scratch_floats = state_floats + group * kBlock + 2 * d + 2 * ng + group * ng;

#pragma omp parallel if (pairs * splits > 1 && nk * pairs >= 64)
  {
    float* scratch = Scratch(scratch_floats);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < pairs * splits; ++task) {
      const int64_t pair = task / splits, sp = task % splits;
      const int64_t i = pair / a.num_kv_heads;
      const int kh = static_cast<int>(pair % a.num_kv_heads);
      float* st = splits > 1 ? partial.data() + task * state_floats : scratch;
      float* m = st;
      float* l = st + group;
      float* acc = st + 2 * group;
      float* scores = scratch + state_floats;
      float* kbuf = scores + group * kBlock;
      float* vbuf = kbuf + d;
      float* step = vbuf + d;
      float* offset = step + ng;
      float* qsum = offset + ng;
      std::fill(m, m + group, -std::numeric_limits<float>::infinity());
      std::fill(l, l + group, 0.0f);
      std::fill(acc, acc + group * static_cast<int64_t>(d), 0.0f);
      const float* q = a.q + (i * a.num_heads + static_cast<int64_t>(kh) * group) * d;
      if (!Reader::kUnitScale)
        for (int g = 0; g < group; ++g)
          for (int c = 0; c < ng; ++c) {
            float s = 0;
            for (int e = 0; e < reader.group; ++e) s += q[g * d + c * reader.group + e];
            qsum[g * ng + c] = s;
          }
      const int64_t qp = a.q_pos[i];
      // This task's share of the visible keys, by rank among them.
      const int64_t per = splits > 1 ? (visible[i] + splits - 1) / splits : std::numeric_limits<int64_t>::max();
      const int64_t rank_begin = splits > 1 ? sp * per : 0;
      const int64_t rank_end = splits > 1 ? std::min(visible[i], rank_begin + per) : per;

      auto fold = [&](const int64_t* idx, int nv) {
        for (int t = 0; t < nv; ++t) {
          const float* k = reader.Key(kv.records + idx[t] * kv.record_bytes, kh, kbuf, step, offset);
          for (int g = 0; g < group; ++g) {
            const float* qg = q + static_cast<int64_t>(g) * d;
            float s;
            if (Reader::kUnitScale) {
              s = VDot(qg, k, d);
            } else {
              s = 0;
              for (int c = 0; c < ng; ++c)
                s += step[c] * VDot(qg + c * reader.group, k + c * reader.group, reader.group) +
                     offset[c] * qsum[g * ng + c];
            }
            scores[g * kBlock + t] = a.scale * s;
          }
        }
        for (int g = 0; g < group; ++g) {
          float* s = scores + g * kBlock;
          float block_max = -std::numeric_limits<float>::infinity();
          for (int t = 0; t < nv; ++t) block_max = std::max(block_max, s[t]);
          const float m_new = std::max(m[g], block_max);
          if (m_new > m[g]) {
            const float c = std::exp(m[g] - m_new);  // 0 on the first block (m = -inf)
            l[g] *= c;
            ScaleRow(acc + static_cast<int64_t>(g) * d, c, d);
            m[g] = m_new;
          }
          const VF vm = VSet1(m_new);
          for (int t = 0; t < nv; t += kLanes) {
            const int n = std::min(kLanes, nv - t);
            VStoreN(s + t, VExp(VSub(VLoadN(s + t, n), vm)), n);
          }
          float l_add = 0;
          for (int t = 0; t < nv; ++t) l_add += s[t];
          l[g] += l_add;
        }
        for (int t = 0; t < nv; ++t) {
          const float* v = reader.Value(kv.records + idx[t] * kv.record_bytes, kh, vbuf);
          for (int g = 0; g < group; ++g) AxpyRow(acc + static_cast<int64_t>(g) * d, scores[g * kBlock + t], v, d);
        }
      };

      int64_t idx[kBlock];
      int nv = 0;
      int64_t rank = 0;
      for (int64_t j = 0; j < nk && rank < rank_end; ++j) {
        const int64_t sj = slot(j);
        if (!sees(qp, kv.pos[sj])) continue;
        if (rank++ < rank_begin) continue;
        idx[nv++] = sj;
        if (nv == kBlock) {
          fold(idx, nv);
          nv = 0;
        }
      }
      if (nv > 0) fold(idx, nv);
      if (splits == 1) {
        float* out = a.out + (i * a.num_heads + static_cast<int64_t>(kh) * group) * d;
        for (int g = 0; g < group; ++g) {
          const float inv = l[g] > 0 ? 1.0f / l[g] : 0.0f;
          for (int x = 0; x < d; ++x) out[g * d + x] = acc[g * d + x] * inv;
        }
      }
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
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t sp = 0; sp < splits; ++sp) mx = std::max(mx, partial[(pair * splits + sp) * state_floats + g]);
      float* o = out + static_cast<int64_t>(g) * d;
      std::fill(o, o + d, 0.0f);
      float l = 0;
      if (mx != -std::numeric_limits<float>::infinity()) {
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* base = partial.data() + (pair * splits + sp) * state_floats;
          if (base[g] == -std::numeric_limits<float>::infinity()) continue;
          const float c = std::exp(base[g] - mx);
          l += base[group + g] * c;
          AxpyRow(o, c, base + 2 * group + static_cast<int64_t>(g) * d, d);
        }
      }
      ScaleRow(o, l > 0 ? 1.0f / l : 0.0f, d);
    }
  }
}

}  // namespace g4::cpu::kvattn
