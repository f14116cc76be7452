// A paged-KV layer for the KV op tests, driven only through the Backend
// interface (Allocate, CopyToDevice / CopyToHost, Ops; helpers from
// backend_test_util.h), so any backend runs the same checks. It holds sequences with random K/V (and per-position
// queries, so a row's query is the same in every step that contains it),
// block stores on the device in one or two record formats, and random,
// non-contiguous block assignments. Steps are lists of runs (a sequence's
// consecutive positions); the harness builds the step's device arrays and
// block tables, optionally writes the runs' K/V (Ops::KvWrite), and runs
// Ops::PagedAttention. The reference decodes the host encoding of each
// sequence (EncodeKvRecords / DecodeKvRecords) and attends in double.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_record.h"
#include "backend/ops.h"
#include "backend_test_util.h"

namespace g4::testing {

inline KvRecordFormat MakeFormat(const KvCodecSpec& spec, int kv_heads, int head_dim) {
  StatusOr<KvRecordFormat> f = KvRecordFormat::Make(spec, kv_heads, head_dim);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : KvRecordFormat{};
}

inline DeviceBuffer MustAllocate(Backend& b, size_t bytes, const char* what) {
  StatusOr<DeviceBuffer> buf = b.Allocate(std::max<size_t>(bytes, 1), what);
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  return buf.ok() ? std::move(buf).value() : DeviceBuffer();
}

inline std::vector<uint8_t> DownloadBytes(Backend& b, const void* device, size_t n) {
  std::vector<uint8_t> host(n);
  if (n) b.CopyToHost(host.data(), device, n);
  b.Sync();
  return host;
}

// Uniform in [-sqrt(3), sqrt(3)): unit variance, and cheap to draw.
inline std::vector<float> RandomUnit(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.7320508f, 1.7320508f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

struct AttentionShape {
  int num_heads = 4;
  int num_kv_heads = 2;
  int head_dim = 64;
  int window = 0;
  float scale = 0;  // 0: 1 / sqrt(head_dim)
  float Scale() const { return scale != 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }
};

// Consecutive positions [first, first + count) of one sequence in a step;
// the sequence holds first + count tokens after the step.
struct KvRun {
  int seq = 0;
  int64_t first = 0;
  int64_t count = 1;
};

class PagedKvHarness {
 public:
  static constexpr uint8_t kSentinel = 0xA5;

  // Store 1 exists when `f1` has a record size. Every block starts as
  // sentinel bytes; block 0 is never given to a sequence.
  PagedKvHarness(Backend& backend, const AttentionShape& shape, const KvRecordFormat& f0, const KvRecordFormat& f1,
                 int block_size, int64_t blocks_per_store, uint32_t seed)
      : b_(backend), shape_(shape), block_size_(block_size), rng_(seed) {
    const KvRecordFormat* f[2] = {&f0, &f1};
    for (int s = 0; s < 2; ++s) {
      if (f[s]->record_bytes == 0) continue;
      Store& st = stores_[s];
      st.format = *f[s];
      st.num_blocks = blocks_per_store;
      const size_t bytes = static_cast<size_t>(blocks_per_store) * block_size * st.format.record_bytes;
      st.buffer = MustAllocate(b_, bytes, "test kv store");
      const std::vector<uint8_t> fill(bytes, kSentinel);
      b_.CopyToDevice(st.buffer.data(), fill.data(), bytes);
      st.free.resize(blocks_per_store - 1);
      std::iota(st.free.begin(), st.free.end(), 1);
      std::shuffle(st.free.begin(), st.free.end(), rng_);
    }
    b_.Sync();
  }

  int64_t width() const { return static_cast<int64_t>(shape_.num_kv_heads) * shape_.head_dim; }
  int64_t q_width() const { return static_cast<int64_t>(shape_.num_heads) * shape_.head_dim; }
  const KvRecordFormat& format(int store) const { return stores_[store].format; }
  int block_size() const { return block_size_; }

  // A sequence of `length` tokens with random K, V and queries, living in
  // `store`, with random blocks of that store. Returns its id.
  int AddSequence(int64_t length, int store) {
    Seq s;
    s.length = length;
    s.store = store;
    s.k = RandomUnit(length * width(), rng_);
    s.v = RandomUnit(length * width(), rng_);
    s.q = RandomUnit(length * q_width(), rng_);
    Store& st = stores_[store];
    const int64_t blocks = (length + block_size_ - 1) / block_size_;
    if (blocks > static_cast<int64_t>(st.free.size())) {
      std::fprintf(stderr, "paged_kv_test_util: test store too small\n");  // a bug in the test itself
      std::abort();
    }
    for (int64_t i = 0; i < blocks; ++i) {
      s.blocks.push_back(st.free.back());
      st.free.pop_back();
    }
    seqs_.push_back(std::move(s));
    return static_cast<int>(seqs_.size()) - 1;
  }
  // Direct access for tests that shape the data (window edges).
  std::vector<float>& keys(int seq) { return seqs_[seq].k; }
  std::vector<float>& values(int seq) { return seqs_[seq].v; }
  std::vector<float>& queries(int seq) { return seqs_[seq].q; }

  // Encodes positions [0, length) of seq on the host and copies the records
  // into its slots on the device (what KvWrite would have written).
  void WriteOnHost(int seq) {
    const Seq& s = seqs_[seq];
    const Store& st = stores_[s.store];
    const int64_t rb = st.format.record_bytes;
    std::vector<uint8_t> rec = Encode(seq);
    for (int64_t p = 0; p < s.length; ++p) {
      const int64_t slot = s.blocks[p / block_size_] * static_cast<int64_t>(block_size_) + p % block_size_;
      b_.CopyToDevice(st.buffer.as<uint8_t>() + slot * rb, rec.data() + p * rb, rb);
    }
    b_.Sync();
  }

  // The host encoding of seq's tokens, in position order.
  std::vector<uint8_t> Encode(int seq) const {
    const Seq& s = seqs_[seq];
    const KvRecordFormat& f = stores_[s.store].format;
    std::vector<uint8_t> rec(s.length * f.record_bytes);
    EncodeKvRecords(f, s.k.data(), s.v.data(), s.length, rec.data());
    return rec;
  }

  // Runs one step over `runs` (in that order; a sequence at most once):
  // block tables with -1 past each sequence's length and, with a window, for
  // blocks no row of the step can see; KvWrite of the runs' K/V when
  // `write` (k and v as strided column slices of one array); then, when
  // `attend`, PagedAttention (naming next_product as the next op's
  // weights), then `then` on out, before anything else. Returns out [rows,
  // num_heads * head_dim].
  std::vector<float> Step(const std::vector<KvRun>& runs, bool write, bool attend = true,
                          const WeightMatrix* next_product = nullptr,
                          const std::function<void(const TensorView&)>& then = nullptr) {
    const int64_t nseq = static_cast<int64_t>(runs.size());
    std::vector<int32_t> positions, row_seq, query_start{0}, kv_len;
    std::vector<uint8_t> seq_store;
    int64_t stride = 1, max_rows = 0, max_len = 0;
    for (const KvRun& r : runs) stride = std::max<int64_t>(stride, (r.first + r.count + block_size_ - 1) / block_size_);
    std::vector<int32_t> table(nseq * stride, -1);
    std::vector<float> q, k, v;
    for (int64_t i = 0; i < nseq; ++i) {
      const KvRun& r = runs[i];
      const Seq& s = seqs_[r.seq];
      EXPECT_LE(r.first + r.count, s.length);
      for (int64_t p = r.first; p < r.first + r.count; ++p) {
        positions.push_back(static_cast<int32_t>(p));
        row_seq.push_back(static_cast<int32_t>(i));
        q.insert(q.end(), s.q.begin() + p * q_width(), s.q.begin() + (p + 1) * q_width());
        k.insert(k.end(), s.k.begin() + p * width(), s.k.begin() + (p + 1) * width());
        v.insert(v.end(), s.v.begin() + p * width(), s.v.begin() + (p + 1) * width());
      }
      query_start.push_back(static_cast<int32_t>(positions.size()));
      const int64_t len = r.first + r.count;
      kv_len.push_back(static_cast<int32_t>(len));
      seq_store.push_back(static_cast<uint8_t>(s.store));
      max_rows = std::max(max_rows, r.count);
      max_len = std::max(max_len, len);
      const int64_t lowest = shape_.window > 0 ? std::max<int64_t>(0, r.first - shape_.window + 1) : 0;
      for (int64_t e = 0; e * block_size_ < len; ++e)
        if ((e + 1) * block_size_ - 1 >= lowest) table[i * stride + e] = s.blocks[e];
    }
    const int64_t rows = static_cast<int64_t>(positions.size());
    DeviceBuffer d_pos = UploadArray(b_, positions), d_row_seq = UploadArray(b_, row_seq);
    DeviceBuffer d_qs = UploadArray(b_, query_start), d_len = UploadArray(b_, kv_len);
    DeviceBuffer d_table = UploadArray(b_, table), d_store = UploadArray(b_, seq_store);
    StepRows sr;
    sr.num_rows = rows;
    sr.num_seqs = nseq;
    sr.positions = d_pos.as<int32_t>();
    sr.row_seq = d_row_seq.as<int32_t>();
    sr.query_start = d_qs.as<int32_t>();
    sr.kv_len = d_len.as<int32_t>();
    sr.max_query_rows = max_rows;
    sr.max_kv_len = max_len;
    const PagedKv kv = Kv(d_table.as<int32_t>(), stride, d_store.as<uint8_t>());
    if (write) {
      // K and V as column slices of one wider array: strided views.
      const int64_t w = width(), pad = 3, cols = 2 * w + pad;
      std::vector<float> kv_host(rows * cols, std::nanf(""));
      for (int64_t r = 0; r < rows; ++r) {
        std::copy(k.begin() + r * w, k.begin() + (r + 1) * w, kv_host.begin() + r * cols);
        std::copy(v.begin() + r * w, v.begin() + (r + 1) * w, kv_host.begin() + r * cols + w + pad);
      }
      const DeviceTensor d_kv = UploadF32(b_, kv_host, rows, cols);
      b_.ops().KvWrite(sr, kv, d_kv.view.Cols(0, w), d_kv.view.Cols(w + pad, w));
      b_.Sync();
    }
    if (!attend) return {};
    // q and out in padded rows (strided views); out's padding must survive.
    const DeviceTensor d_q = UploadF32(b_, q, rows, q_width(), q_width() + 5);
    const DeviceTensor d_out = AllocTensor(b_, DType::kF32, rows, q_width(), q_width() + 7);
    PagedAttentionArgs a;
    a.rows = sr;
    a.kv = kv;
    a.q = d_q.view;
    a.out = d_out.view;
    a.num_heads = shape_.num_heads;
    a.num_kv_heads = shape_.num_kv_heads;
    a.head_dim = shape_.head_dim;
    a.window = shape_.window;
    a.scale = shape_.Scale();
    a.next_product = next_product;
    b_.ops().PagedAttention(a);
    if (then) then(d_out.view);
    b_.Sync();
    EXPECT_TRUE(GuardsIntact(b_, d_out));
    return DownloadF32(b_, d_out.view);
  }

  // The double-precision reference for the rows of `runs`, from the host
  // encoding of each sequence, and per element a tolerance scaled by the
  // largest visible value of its head.
  void Reference(const std::vector<KvRun>& runs, std::vector<double>* out, std::vector<double>* tol) const {
    out->clear();
    tol->clear();
    const int d = shape_.head_dim, group = shape_.num_heads / shape_.num_kv_heads;
    const double scale = shape_.Scale();
    for (const KvRun& r : runs) {
      const Seq& s = seqs_[r.seq];
      const KvRecordFormat& f = stores_[s.store].format;
      const std::vector<uint8_t> rec = Encode(r.seq);
      std::vector<float> k(s.length * width()), v(s.length * width());
      DecodeKvRecords(f, rec.data(), s.length, k.data(), v.data());
      for (int64_t p = r.first; p < r.first + r.count; ++p) {
        const int64_t lo = shape_.window > 0 ? std::max<int64_t>(0, p - shape_.window + 1) : 0;
        for (int h = 0; h < shape_.num_heads; ++h) {
          const int kh = h / group;
          const float* q = s.q.data() + p * q_width() + static_cast<int64_t>(h) * d;
          std::vector<double> score(p - lo + 1);
          double mx = -INFINITY, vmax = 0;
          for (int64_t j = lo; j <= p; ++j) {
            const float* kj = k.data() + j * width() + static_cast<int64_t>(kh) * d;
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * kj[x];
            score[j - lo] = dot * scale;
            mx = std::max(mx, score[j - lo]);
          }
          double sum = 0;
          for (double& e : score) sum += (e = std::exp(e - mx));
          std::vector<double> o(d, 0.0);
          for (int64_t j = lo; j <= p; ++j) {
            const float* vj = v.data() + j * width() + static_cast<int64_t>(kh) * d;
            for (int x = 0; x < d; ++x) {
              o[x] += score[j - lo] / sum * vj[x];
              vmax = std::max(vmax, std::fabs(static_cast<double>(vj[x])));
            }
          }
          for (int x = 0; x < d; ++x) {
            out->push_back(o[x]);
            tol->push_back(2e-5 * vmax + 1e-5 * std::fabs(o[x]));
          }
        }
      }
    }
  }

  // Device store contents (for write tests).
  std::vector<uint8_t> DownloadStore(int store) {
    const Store& st = stores_[store];
    return DownloadBytes(b_, st.buffer.data(), st.num_blocks * block_size_ * st.format.record_bytes);
  }
  PagedKvStore StoreView(int store) {
    Store& st = stores_[store];
    PagedKvStore v;
    v.format = st.format;
    v.records = st.buffer.as<uint8_t>();
    v.num_blocks = st.num_blocks;
    if (st.format.rotates_values()) {
      if (!st.centroids.data()) {
        const int n = 1 << st.format.spec.value_bits;
        st.centroids = UploadRaw(TurboValueCentroids(st.format.spec.value_bits), n);
        st.signs = UploadRaw(TurboValueSigns(st.format.head_dim), st.format.head_dim);
      }
      v.value_centroids = st.centroids.as<float>();
      v.value_signs = st.signs.as<float>();
    }
    return v;
  }
  int64_t slot_of(int seq, int64_t pos) const {
    const Seq& s = seqs_[seq];
    return s.blocks[pos / block_size_] * static_cast<int64_t>(block_size_) + pos % block_size_;
  }
  int store_of(int seq) const { return seqs_[seq].store; }

 private:
  struct Store {
    KvRecordFormat format;
    int64_t num_blocks = 0;
    DeviceBuffer buffer;
    std::vector<int32_t> free;
    DeviceBuffer centroids, signs;
  };
  struct Seq {
    int64_t length = 0;
    int store = 0;
    std::vector<float> k, v, q;
    std::vector<int32_t> blocks;
  };

  DeviceBuffer UploadRaw(const float* host, int64_t n) { return UploadArray(b_, std::vector<float>(host, host + n)); }
  PagedKv Kv(const int32_t* table, int64_t stride, const uint8_t* seq_store) {
    PagedKv kv;
    for (int s = 0; s < 2; ++s)
      if (stores_[s].format.record_bytes) kv.store[s] = StoreView(s);
    kv.tables.block_table = table;
    kv.tables.table_stride = stride;
    kv.tables.seq_store = seq_store;
    kv.block_size = block_size_;
    return kv;
  }

  Backend& b_;
  AttentionShape shape_;
  int block_size_;
  std::mt19937 rng_;
  Store stores_[2];
  std::vector<Seq> seqs_;
};

}  // namespace g4::testing
