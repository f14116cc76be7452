// Ops::PagedAttention's CUDA entry (src/backend/cuda/paged_attention.cu:
// the split or streaming kernel, the query-tiled kernel for prefill runs,
// the merge with TurboQuant's inverse rotation) on the SIMT emulator,
// without a GPU, for stores the CUDA-core kernels take (plain f16,
// TurboQuant): each output row within float rounding of attention in double
// over the decoded records, and a row's bits the same decoded alone and
// beside other rows. tests/backend runs the same entry on a GPU against the
// CPU backend; this runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/launch.h"
#include "backend/kv_record.h"
#include "backend/ops.h"
#include "host_scratch.h"
#include "quantize_sim.h"
#include "sim_kv.h"

namespace g4::cuda {
namespace {

struct Shape {
  int heads, kv_heads, d, window;
};

// Sequences of random K, V and queries in one store of `spec`, blocks of
// 16 tokens in a shuffled pool.
class AttentionSim {
 public:
  AttentionSim(const Shape& s, const KvCodecSpec& spec, std::vector<int> lens, uint32_t seed)
      : s_(s), kv_(*KvRecordFormat::Make(spec, s.kv_heads, s.d), s.heads, kBlock, std::move(lens), seed) {}

  int64_t QWidth() const { return static_cast<int64_t>(s_.heads) * s_.d; }

  // The output of a step of runs (sequence, first position, rows), the
  // rows of each run consecutive, runs in the order given.
  // With next_product, the merge's quantization of out for it lands in
  // quantized() (when PagedAttention says it did: *prepared).
  std::vector<float> Step(const std::vector<std::pair<int, std::pair<int, int>>>& runs,
                          const WeightMatrix* next_product = nullptr, bool* prepared = nullptr) {
    std::vector<int32_t> positions, row_seq, query_start(kv_.lens.size() + 1, 0), kv_len(kv_.lens.size(), 0);
    std::vector<float> q;
    int64_t max_rows = 0;
    for (const auto& [seq, span] : runs) {
      const auto [first, count] = span;
      for (int p = first; p < first + count; ++p) {
        positions.push_back(p);
        row_seq.push_back(seq);
        q.insert(q.end(), kv_.queries[seq].begin() + p * QWidth(),
                 kv_.queries[seq].begin() + (p + 1) * QWidth());
      }
      kv_len[seq] = first + count;
      max_rows = std::max<int64_t>(max_rows, count);
    }
    // query_start only describes steps whose rows are grouped by sequence
    // in order; these are.
    int64_t r = 0;
    for (size_t sq = 0; sq < kv_.lens.size(); ++sq) {
      query_start[sq] = static_cast<int32_t>(r);
      for (const auto& [seq, span] : runs)
        if (seq == static_cast<int>(sq)) r += span.second;
    }
    query_start[kv_.lens.size()] = static_cast<int32_t>(r);
    const int64_t n = static_cast<int64_t>(positions.size());
    std::vector<float> out(static_cast<size_t>(n * QWidth()), std::nanf(""));
    PagedAttentionArgs a;
    a.rows.num_rows = n;
    a.rows.num_seqs = static_cast<int64_t>(kv_.lens.size());
    a.rows.positions = positions.data();
    a.rows.row_seq = row_seq.data();
    a.rows.query_start = query_start.data();
    a.rows.kv_len = kv_len.data();
    a.rows.max_query_rows = max_rows;
    a.rows.max_kv_len = *std::max_element(kv_len.begin(), kv_len.end());
    a.kv.store[0].format = kv_.format;
    a.kv.store[0].records = kv_.pool.data();
    a.kv.store[0].num_blocks = kv_.blocks;
    if (kv_.format.rotates_values()) {
      a.kv.store[0].value_centroids = TurboValueCentroids(kv_.format.spec.value_bits);
      a.kv.store[0].value_signs = TurboValueSigns(s_.d);
    }
    a.kv.tables.block_table = kv_.table.data();
    a.kv.tables.table_stride = kv_.table_stride;
    a.kv.block_size = kBlock;
    a.q = TensorView::F32(q.data(), n, QWidth(), MemorySpace::kDevice);
    a.out = TensorView::F32(out.data(), n, QWidth(), MemorySpace::kDevice);
    a.num_heads = s_.heads;
    a.num_kv_heads = s_.kv_heads;
    a.head_dim = s_.d;
    a.window = s_.window;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s_.d));
    a.next_product = next_product;
    const bool did = PagedAttention(a, scratch_, nullptr);
    if (prepared) *prepared = did;
    return out;
  }

  // The quantized rows the last Step prepared, for `rows` rows in groups of `group`.
  QRows Quantized(int64_t rows, int group) {
    return QRowsIn(scratch_.Get(Scratch::kQuant, QRowsBytes(rows, QWidth(), group)), rows, QWidth(), group);
  }

  // Attention in double for (seq, pos) over the decoded records.
  std::vector<double> Reference(int seq, int pos, double* vmax) const {
    return AttentionInDouble(kv_.queries[seq], kv_.keys[seq], kv_.values[seq], s_.heads, s_.kv_heads, s_.d,
                             s_.window, pos, vmax);
  }

 private:
  static constexpr int kBlock = 16;
  Shape s_;
  SimKv kv_;
  sim::HostScratch scratch_;
};

bool SameBits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// A step of a long decode row and a prefill run of 9 rows (the tiled
// kernel): the long row and the run's last row against themselves alone
// (the bits), every row against the double reference.
void ExpectStepKeepsTheContract(const Shape& s, const KvCodecSpec& spec, uint32_t seed) {
  std::ostringstream os;
  os << spec.signature() << " d" << s.d << " " << s.heads << "/" << s.kv_heads << " window " << s.window;
  const std::string what = os.str();
  AttentionSim sim(s, spec, {2100, 150}, seed);
  const std::vector<std::pair<int, std::pair<int, int>>> runs = {{0, {2099, 1}}, {1, {141, 9}}};
  const std::vector<float> both = sim.Step(runs);
  const int64_t qw = sim.QWidth();
  // TurboQuant: the long row's merge in chunks (its 33 splits; the default
  // from 32) against one block per head.
  setenv("G4_CUDA_ATTN_TURBO_CHUNKS", "0", 1);
  const std::vector<float> whole = sim.Step(runs);
  unsetenv("G4_CUDA_ATTN_TURBO_CHUNKS");
  EXPECT_TRUE(SameBits(whole.data(), both.data(), static_cast<int64_t>(both.size()))) << what << ": merge shapes";
  EXPECT_TRUE(SameBits(sim.Step({{0, {2099, 1}}}).data(), both.data(), qw)) << what << ": the long row alone";
  EXPECT_TRUE(SameBits(sim.Step({{1, {149, 1}}}).data(), both.data() + 9 * qw, qw))
      << what << ": the run's last row";
  int64_t r = 0;
  for (const auto& [seq, span] : runs)
    for (int p = span.first; p < span.first + span.second; ++p, ++r) {
      double vmax = 0;
      const std::vector<double> ref = sim.Reference(seq, p, &vmax);
      double worst = 0;
      for (int64_t i = 0; i < qw; ++i) worst = std::max(worst, std::abs(both[r * qw + i] - ref[i]));
      EXPECT_LE(worst, 2e-5 * std::max(1.0, vmax)) << what << ": row " << r << " (position " << p << ")";
    }
}

TEST(PagedAttentionSim, CudaCoreKernelsMatchTheReference) {
  uint32_t seed = 10;
  for (const KvCodecSpec& spec :
       {KvCodecSpec::Turbo(8, 3), KvCodecSpec::Turbo(4, 2), KvCodecSpec::Plain(DType::kF16)})
    // (the unwindowed head_dim 512 step has blocks enough for grouped heads,
    // 2 a block; the others take one head a block)
    for (const Shape& s : {Shape{8, 2, 256, 0}, Shape{4, 1, 512, 300}, Shape{4, 1, 512, 0}})
      ExpectStepKeepsTheContract(s, spec, ++seed);
}

// The merge quantizing out for the product that follows
// (PagedAttentionArgs::next_product): out's bits unchanged, and the
// prepared rows QuantizeGroup's on out, bit for bit; TurboQuant rows (the
// merge rotates them) are not prepared.
TEST(PagedAttentionSim, MergePreparesTheNextProductsInput) {
  struct Case {
    KvCodecSpec spec;
    Shape s;
    int bits, group;
  };
  uint32_t seed = 40;
  for (const Case& c : {Case{KvCodecSpec::Plain(DType::kF16), Shape{8, 2, 256, 0}, 4, 64},
                  Case{KvCodecSpec::Plain(DType::kF16), Shape{8, 2, 256, 0}, 8, 32},
                  Case{KvCodecSpec::Plain(DType::kF16), Shape{4, 1, 512, 100}, 4, 128},
                  Case{KvCodecSpec::Turbo(4, 2), Shape{4, 1, 512, 0}, 4, 64}}) {
    const KvCodecSpec& spec = c.spec;
    const Shape& s = c.s;
    const int bits = c.bits, group = c.group;
    SCOPED_TRACE(spec.signature() + " d" + std::to_string(s.d) + " bits " + std::to_string(bits) + " group " +
                 std::to_string(group));
    AttentionSim sim(s, spec, {300, 150}, ++seed);
    const std::vector<std::pair<int, std::pair<int, int>>> runs = {{0, {299, 1}}, {1, {141, 9}}};
    WeightMatrix w;
    w.format = WeightMatrix::Format::kAffine;
    w.rows = 8;
    w.cols = sim.QWidth();
    w.bits = bits;
    w.group_size = group;
    const std::vector<float> plain = sim.Step(runs);
    bool prepared = false;
    const std::vector<float> hinted = sim.Step(runs, &w, &prepared);
    EXPECT_TRUE(SameBits(plain.data(), hinted.data(), static_cast<int64_t>(plain.size())));
    EXPECT_EQ(prepared, spec.kind != KvCodecSpec::Kind::kTurbo);
    if (!prepared) continue;
    const int64_t rows = 10, width = sim.QWidth(), groups = width / group;
    const QRows got = sim.Quantized(rows, group);
    std::vector<char> want_buf(QRowsBytes(rows, width, group));
    const QRows want = QRowsIn(want_buf.data(), rows, width, group);
    for (int64_t m = 0; m < rows; ++m)
      sim::QuantizeRowInto(want, m, plain.data() + m * width, nullptr, width, group, bits);
    EXPECT_EQ(std::memcmp(got.q, want.q, rows * width), 0) << "codes";
    EXPECT_EQ(std::memcmp(got.d, want.d, rows * groups * sizeof(float)), 0) << "d";
    EXPECT_EQ(std::memcmp(got.xs, want.xs, rows * groups * sizeof(float)), 0) << "xs";
  }
}

}  // namespace
}  // namespace g4::cuda
