// The data of the attention emulator tests (paged_attention_mma_sim_test.cc,
// paged_attention_sim_test.cc): sequences of random keys, values and
// queries encoded into one store's records in a shuffled pool, and
// attention in double over the records decoded back. Test-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "backend/kv_record.h"

namespace g4::cuda {

// Row `pos` of one sequence: q [positions, heads * d], keys and values
// [positions, kv_heads * d] (values in the original domain); keys lo .. pos
// with lo = pos - window + 1 when windowed. *vmax: the largest |value| read.
inline std::vector<double> AttentionInDouble(const std::vector<float>& q, const std::vector<float>& keys,
                                             const std::vector<float>& values, int heads, int kv_heads, int d,
                                             int window, int pos, double* vmax) {
  const int G = heads / kv_heads;
  const int64_t w = static_cast<int64_t>(kv_heads) * d, qw = static_cast<int64_t>(heads) * d;
  const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
  std::vector<double> out(static_cast<size_t>(qw));
  *vmax = 0;
  for (int h = 0; h < heads; ++h) {
    const int kh = h / G;
    const float* qh = q.data() + pos * qw + h * d;
    std::vector<double> sc(pos - lo + 1);
    double m = -INFINITY;
    for (int j = lo; j <= pos; ++j) {
      double dot = 0;
      for (int e = 0; e < d; ++e) dot += static_cast<double>(qh[e]) * keys[j * w + kh * d + e];
      sc[j - lo] = dot / std::sqrt(static_cast<double>(d));
      m = std::max(m, sc[j - lo]);
    }
    double l = 0;
    for (double& x : sc) l += (x = std::exp(x - m));
    for (int e = 0; e < d; ++e) {
      double acc = 0;
      for (int j = lo; j <= pos; ++j) acc += sc[j - lo] * values[j * w + kh * d + e];
      out[h * d + e] = acc / l;
    }
    for (int j = lo; j <= pos; ++j)
      for (int e = 0; e < d; ++e) *vmax = std::max<double>(*vmax, std::fabs(values[j * w + kh * d + e]));
  }
  return out;
}

// Sequences of `lens` tokens (unit-variance uniform K, V and queries,
// drawn from `seed`) in blocks of `block_size` records, block ids
// shuffled, 3 spare blocks.
struct SimKv {
  SimKv(const KvRecordFormat& f, int heads, int block_size, std::vector<int> lengths, uint32_t seed)
      : format(f), block(block_size), lens(std::move(lengths)) {
    std::mt19937 rng(seed);
    const int64_t w = format.width();
    std::uniform_real_distribution<float> u(-1.7320508f, 1.7320508f);
    for (int len : lens) table_stride = std::max(table_stride, (len + block - 1) / block);
    blocks = table_stride * static_cast<int>(lens.size()) + 3;
    pool.assign(static_cast<size_t>(blocks) * block * format.record_bytes, 0);
    std::vector<int> ids(blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    table.assign(lens.size() * table_stride, -1);
    for (size_t q = 0; q < lens.size(); ++q) {
      std::vector<float> k(static_cast<size_t>(lens[q]) * w), v(k.size());
      for (float& x : k) x = u(rng);
      for (float& x : v) x = u(rng);
      for (int j = 0; j < lens[q]; ++j) {
        int& b = table[q * table_stride + j / block];
        if (b < 0) b = ids[q * table_stride + j / block];
        EncodeKvRecords(format, k.data() + j * w, v.data() + j * w, 1, Rec(static_cast<int>(q), j));
      }
      // The reference reads the records back (values in the original domain).
      keys.emplace_back(k.size());
      values.emplace_back(v.size());
      for (int j = 0; j < lens[q]; ++j)
        DecodeKvRecords(format, Rec(static_cast<int>(q), j), 1, keys.back().data() + j * w,
                        values.back().data() + j * w);
      queries.emplace_back(static_cast<size_t>(lens[q]) * heads * format.head_dim);
      for (float& x : queries.back()) x = u(rng);
    }
  }

  uint8_t* Rec(int seq, int j) {
    const int b = table[seq * table_stride + j / block];
    return pool.data() + (static_cast<int64_t>(b) * block + j % block) * format.record_bytes;
  }
  int MaxLen() const { return *std::max_element(lens.begin(), lens.end()); }

  KvRecordFormat format;
  int block;
  std::vector<int> lens;
  int table_stride = 0, blocks = 0;
  std::vector<uint8_t> pool;
  std::vector<int32_t> table;
  std::vector<std::vector<float>> keys, values, queries;
};

}  // namespace g4::cuda
