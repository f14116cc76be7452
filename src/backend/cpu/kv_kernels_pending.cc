// TEMPORARY (lead's integration stand-in until batched-kvops merges): plain
// scalar versions of the paged-KV kernels, to run the model end to end.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kv_kernels.h"
#include "core/check.h"

namespace g4::cpu {
namespace {

const PagedKvStore& StoreOf(const PagedKv& kv, int64_t s) {
  return kv.store[kv.tables.seq_store ? kv.tables.seq_store[s] : 0];
}
const uint8_t* Record(const PagedKv& kv, int64_t s, int64_t pos) {
  const PagedKvStore& st = StoreOf(kv, s);
  const int32_t block = kv.tables.block_table[s * kv.tables.table_stride + pos / kv.block_size];
  G4_CHECK(block > 0);
  return st.records + (static_cast<int64_t>(block) * kv.block_size + pos % kv.block_size) * st.format.record_bytes;
}

}  // namespace

void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v) {
  for (int64_t t = 0; t < rows.num_rows; ++t) {
    const int64_t s = rows.row_seq[t];
    const PagedKvStore& st = StoreOf(kv, s);
    EncodeKvRecords(st.format, static_cast<const float*>(k.at(t, 0)), static_cast<const float*>(v.at(t, 0)), 1,
                    const_cast<uint8_t*>(Record(kv, s, rows.positions[t])));
  }
}

void PagedAttention(const PagedAttentionArgs& a) {
  const int D = a.head_dim, group = a.num_heads / a.num_kv_heads;
  for (int64_t t = 0; t < a.rows.num_rows; ++t) {
    const int64_t s = a.rows.row_seq[t], p = a.rows.positions[t];
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
    const KvRecordFormat& f = StoreOf(a.kv, s).format;
    const int64_t W = f.width();
    std::vector<float> keys((p - lo + 1) * W), values((p - lo + 1) * W);
    for (int64_t j = lo; j <= p; ++j)
      DecodeKvRecords(f, Record(a.kv, s, j), 1, &keys[(j - lo) * W], &values[(j - lo) * W]);
    for (int h = 0; h < a.num_heads; ++h) {
      const int kh = h / group;
      const float* q = static_cast<const float*>(a.q.at(t, 0)) + h * D;
      std::vector<double> score(p - lo + 1);
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j <= p - lo; ++j) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += q[i] * keys[j * W + kh * D + i];
        score[j] = d * a.scale;
        m = std::max(m, score[j]);
      }
      double l = 0;
      for (double& x : score) l += (x = std::exp(x - m));
      float* out = static_cast<float*>(a.out.at(t, 0)) + h * D;
      for (int i = 0; i < D; ++i) {
        double acc = 0;
        for (int64_t j = 0; j <= p - lo; ++j) acc += score[j] * values[j * W + kh * D + i];
        out[i] = static_cast<float>(acc / l);
      }
    }
  }
}

void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                    std::span<const int32_t> from_blocks, std::span<const int32_t> to_blocks,
                    std::span<const int32_t> tokens) {
  const int64_t W = from.format.width();
  std::vector<float> k(W), v(W);
  for (size_t b = 0; b < from_blocks.size(); ++b)
    for (int32_t i = 0; i < tokens[b]; ++i) {
      DecodeKvRecords(from.format,
                      from.records + (static_cast<int64_t>(from_blocks[b]) * block_size + i) * from.format.record_bytes,
                      1, k.data(), v.data());
      EncodeKvRecords(to.format, k.data(), v.data(), 1,
                      to.records + (static_cast<int64_t>(to_blocks[b]) * block_size + i) * to.format.record_bytes);
    }
}

}  // namespace g4::cpu
