// The tensor-core attention kernels on the SIMT emulator (include/simt.h),
// without a GPU: a step holding a prefill run of one sequence and another
// sequence's run (so a run-kernel tile spans two sequences) against each of
// its rows alone on the row kernel, bit for bit in every split state; and
// the merged rows against attention in double over the same bf16 records.
// The emulated mma rounds differently from the hardware, so this checks the
// kernels' logic (fragments, masks, tiles, the shared order), not the
// hardware's bits; tests/backend runs them on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/kv_codec.cuh"
#include "backend/cuda/paged_attention_core.cuh"
#include "backend/kv_record.h"
#include "sim_kv.h"

namespace g4::cuda::attn {
namespace {

struct Shape {
  int heads, kv_heads, d, window, block_size;
};

class MmaSim {
 public:
  MmaSim(const Shape& s, std::vector<int> lens, uint32_t seed)
      : s_(s),
        kv_(*KvRecordFormat::Make(KvCodecSpec::Plain(DType::kBF16), s.kv_heads, s.d), s.heads, s.block_size,
            std::move(lens), seed) {}

  int64_t StateFloats() const { return static_cast<int64_t>(s_.heads / s_.kv_heads) * (2 + s_.d); }
  int SplitsMax() const {
    const int max_len = kv_.MaxLen();
    int splits = (max_len + kSplitKeys - 1) / kSplitKeys;
    if (s_.window > 0) splits = std::min(splits, (s_.window + kSplitKeys - 1) / kSplitKeys + 1);
    return splits;
  }
  int64_t RowStateFloats() const { return static_cast<int64_t>(s_.kv_heads) * SplitsMax() * StateFloats(); }

  // The split states of a step of (sequence, position) rows.
  // q_vec: the kernel may read q four floats at a time (where aligned).
  // merged: when given, the row kernel also merges each row's splits into
  // it (a.merge_count), and every counter must be back at zero after.
  std::vector<float> States(const std::vector<std::pair<int, int>>& rows, bool runs, bool q_vec = true,
                            std::vector<float>* merged = nullptr, bool state_vec = true) {
    const int64_t n = static_cast<int64_t>(rows.size()), qw = static_cast<int64_t>(s_.heads) * s_.d;
    std::vector<int32_t> positions(n), row_seq(n), kv_len(kv_.lens.begin(), kv_.lens.end());
    std::vector<float> q(static_cast<size_t>(n) * qw);
    for (int64_t r = 0; r < n; ++r) {
      row_seq[r] = rows[r].first;
      positions[r] = rows[r].second;
      std::memcpy(q.data() + r * qw,
                  kv_.queries[rows[r].first].data() + static_cast<int64_t>(rows[r].second) * qw,
                  qw * sizeof(float));
    }
    std::vector<float> partial(static_cast<size_t>(n * RowStateFloats()), std::nanf(""));
    AttnParams a{};
    a.positions = positions.data();
    a.row_seq = row_seq.data();
    a.kv_len = kv_len.data();
    a.num_seqs = static_cast<int64_t>(kv_.lens.size());
    a.store[0].f = MakeDevKvFormat(kv_.format);
    a.store[0].records = kv_.pool.data();
    a.store[0].num_blocks = kv_.blocks;
    a.store[0].vec = true;
    a.store[0].mma = true;
    EXPECT_TRUE(MmaStorable(a.store[0], s_.d));
    a.table = kv_.table.data();
    a.table_stride = kv_.table_stride;
    a.block_size = s_.block_size;
    a.q = q.data();
    a.ldq = qw;
    a.q_vec = q_vec && qw % 4 == 0 && reinterpret_cast<uintptr_t>(q.data()) % 16 == 0;
    a.heads = s_.heads;
    a.kv_heads = s_.kv_heads;
    a.d = s_.d;
    a.group = s_.heads / s_.kv_heads;
    a.window = s_.window;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s_.d));
    a.splits_max = SplitsMax();
    a.partial = partial.data();
    a.max_kv_len = kv_.MaxLen();
    std::vector<int> counts;
    if (merged != nullptr) {
      const int G = s_.heads / s_.kv_heads;
      merged->assign(static_cast<size_t>(n) * qw, std::nanf(""));
      a.out = merged->data();
      a.ldo = qw;
      counts.assign(static_cast<size_t>(n) * s_.kv_heads * G, 0);
      a.merge_count = counts.data();
      a.state_vec = state_vec && G % 2 == 0 && s_.d % 4 == 0;
    }
    LaunchMma(a, runs, n, nullptr);
    for (const int c : counts) EXPECT_EQ(c, 0) << "a merge counter left behind";
    return partial;
  }

  // Row `r` of a step's states merged per query head, in double.
  std::vector<double> Merge(const std::vector<float>& states, int64_t r, int pos) const {
    const int G = s_.heads / s_.kv_heads, d = s_.d;
    const int lo = s_.window > 0 ? std::max(0, pos - s_.window + 1) : 0;
    const int splits = pos / kSplitKeys - lo / kSplitKeys + 1;
    std::vector<double> out(static_cast<size_t>(s_.heads) * d);
    for (int kh = 0; kh < s_.kv_heads; ++kh)
      for (int g = 0; g < G; ++g) {
        double mx = -INFINITY;
        for (int sp = 0; sp < splits; ++sp) mx = std::max<double>(mx, At(states, r, kh, sp)[g]);
        double l = 0;
        std::vector<double> acc(d, 0.0);
        for (int sp = 0; sp < splits; ++sp) {
          const float* st = At(states, r, kh, sp);
          const double c = std::exp(st[g] - mx);
          l += st[G + g] * c;
          for (int e = 0; e < d; ++e) acc[e] += st[2 * G + g * d + e] * c;
        }
        for (int e = 0; e < d; ++e) out[(static_cast<size_t>(kh) * G + g) * d + e] = acc[e] / l;
      }
    return out;
  }

  // Row r's output as MergeKernel (paged_attention.cu) computes it from the
  // states, the same float operations in the same order.
  std::vector<float> MergeAsTheKernel(const std::vector<float>& states, int64_t r, int pos) const {
    const int G = s_.heads / s_.kv_heads, d = s_.d;
    const int splits = Splits(pos);
    std::vector<float> out(static_cast<size_t>(s_.heads) * d);
    for (int kh = 0; kh < s_.kv_heads; ++kh)
      for (int g = 0; g < G; ++g) {
        float mx = -INFINITY;
        for (int sp = 0; sp < splits; ++sp) mx = std::fmax(mx, At(states, r, kh, sp)[g]);
        float l = 0.0f;
        std::vector<float> acc(d, 0.0f);
        for (int sp = 0; sp < splits; ++sp) {
          const float* st = At(states, r, kh, sp);
          if (st[g] == -INFINITY) continue;
          const float c = std::exp(st[g] - mx);
          l = l + st[G + g] * c;
          for (int e = 0; e < d; ++e) acc[e] = std::fma(c, st[2 * G + g * d + e], acc[e]);
        }
        const float inv = l > 0 ? 1.0f / l : 0.0f;
        for (int e = 0; e < d; ++e) out[(static_cast<size_t>(kh) * G + g) * d + e] = acc[e] * inv;
      }
    return out;
  }

  // Attention in double for (seq, pos) over the decoded records.
  std::vector<double> Reference(int seq, int pos, double* vmax) const {
    return AttentionInDouble(kv_.queries[seq], kv_.keys[seq], kv_.values[seq], s_.heads, s_.kv_heads, s_.d,
                             s_.window, pos, vmax);
  }

  const float* At(const std::vector<float>& states, int64_t r, int kh, int sp) const {
    return states.data() + r * RowStateFloats() + (static_cast<int64_t>(kh) * SplitsMax() + sp) * StateFloats();
  }
  int Splits(int pos) const {
    const int lo = s_.window > 0 ? std::max(0, pos - s_.window + 1) : 0;
    return pos / kSplitKeys - lo / kSplitKeys + 1;
  }

 private:
  Shape s_;
  SimKv kv_;
};

class MmaSimTest : public ::testing::TestWithParam<Shape> {};

TEST_P(MmaSimTest, RunKernelGivesTheRowKernelsStatesAndMatchesTheReference) {
  const Shape s = GetParam();
  // Sequence 0: 150 keys, its last 70 rows a prefill run; sequence 1: a
  // short run, so that a run-kernel tile holds rows of both.
  MmaSim sim(s, {150, 23}, 1000u + s.d + s.heads + s.window);
  std::vector<std::pair<int, int>> step;
  for (int p = 80; p < 150; ++p) step.push_back({0, p});
  for (int p = 3; p < 23; ++p) step.push_back({1, p});
  const std::vector<float> run = sim.States(step, /*runs=*/true);
  if (s.d == 512) {  // the values in the keys' buffer (G4_CUDA_ATTN_MMA_SHARE=1): the same bits
    setenv("G4_CUDA_ATTN_MMA_SHARE", "1", 1);
    const std::vector<float> shared = sim.States(step, true);
    unsetenv("G4_CUDA_ATTN_MMA_SHARE");
    EXPECT_EQ(0, std::memcmp(run.data(), shared.data(), run.size() * sizeof(float))) << "G4_CUDA_ATTN_MMA_SHARE=1";
  }
  const int kv_heads = s.kv_heads;
  for (const int i : {0, 1, 20, 40, 47, 48, 63, 69, 70, 71, 89}) {
    const auto [seq, pos] = step[i];
    const std::vector<float> alone = sim.States({{seq, pos}}, /*runs=*/false);
    const std::vector<float> scalar_q = sim.States({{seq, pos}}, false, /*q_vec=*/false);
    const std::string what = "d" + std::to_string(s.d) + " " + std::to_string(s.heads) + "/" +
                             std::to_string(s.kv_heads) + " window " + std::to_string(s.window) + ", seq " +
                             std::to_string(seq) + " pos " + std::to_string(pos);
    for (int kh = 0; kh < kv_heads; ++kh)
      for (int sp = 0; sp < sim.Splits(pos); ++sp)
        EXPECT_EQ(0, std::memcmp(sim.At(run, i, kh, sp), sim.At(alone, 0, kh, sp), sim.StateFloats() * sizeof(float)))
            << what << " kv head " << kh << " split " << sp;
    EXPECT_EQ(0, std::memcmp(alone.data(), scalar_q.data(), alone.size() * sizeof(float))) << what << ": q read by floats";
    double vmax = 0;
    const std::vector<double> want = sim.Reference(seq, pos, &vmax);
    const std::vector<double> got = sim.Merge(run, i, pos);
    double worst = 0;
    for (size_t e = 0; e < want.size(); ++e)
      worst = std::max(worst, std::fabs(got[e] - want[e]) / (2e-5 * vmax + 1e-5 * std::fabs(want[e])));
    EXPECT_LE(worst, 1.0) << what << ": worst error over the tolerance";
  }
}

// The row kernel's own merge (attention_last_merge.cuh) for a decode step
// of rows of three sequences: MergeKernel's operations on the states, bit
// for bit, whether the states are read four floats at a time or one; the
// states themselves as without it; and within the reference.
TEST_P(MmaSimTest, RowKernelMergesAsTheMergeKernel) {
  const Shape s = GetParam();
  MmaSim sim(s, {700, 23, 300}, 2000u + s.d + s.heads + s.window);
  const std::vector<std::pair<int, int>> step = {{0, 699}, {1, 22}, {2, 299}, {0, 650}};
  const std::vector<float> plain = sim.States(step, false);
  for (const bool state_vec : {true, false}) {
    std::vector<float> merged;
    const std::vector<float> states = sim.States(step, false, true, &merged, state_vec);
    EXPECT_EQ(0, std::memcmp(plain.data(), states.data(), plain.size() * sizeof(float)));
    const int64_t qw = static_cast<int64_t>(s.heads) * s.d;
    for (size_t i = 0; i < step.size(); ++i) {
      const auto [seq, pos] = step[i];
      const std::string what = "d" + std::to_string(s.d) + " " + std::to_string(s.heads) + "/" +
                               std::to_string(s.kv_heads) + " window " + std::to_string(s.window) + ", seq " +
                               std::to_string(seq) + " pos " + std::to_string(pos) + (state_vec ? "" : ", by floats");
      const std::vector<float> want = sim.MergeAsTheKernel(states, static_cast<int64_t>(i), pos);
      EXPECT_EQ(0, std::memcmp(want.data(), merged.data() + i * qw, qw * sizeof(float))) << what;
      double vmax = 0, worst = 0;
      const std::vector<double> ref = sim.Reference(seq, pos, &vmax);
      for (size_t e = 0; e < ref.size(); ++e)
        worst = std::max(worst, std::fabs(merged[i * qw + e] - ref[e]) / (2e-5 * vmax + 1e-5 * std::fabs(ref[e])));
      EXPECT_LE(worst, 1.0) << what << ": worst error over the tolerance";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MmaSimTest,
                         ::testing::Values(Shape{2, 1, 64, 0, 16}, Shape{6, 2, 128, 40, 8}, Shape{8, 2, 256, 0, 16},
                                           Shape{4, 2, 256, 100, 16}, Shape{16, 1, 512, 0, 16},
                                           Shape{8, 2, 512, 70, 16}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return "d" + std::to_string(i.param.d) + "_" + std::to_string(i.param.heads) + "x" +
                                  std::to_string(i.param.kv_heads) + "_w" + std::to_string(i.param.window);
                         });

}  // namespace
}  // namespace g4::cuda::attn
