// MatMul must be row-invariant: the output for an input row is bit-identical
// whatever the number of rows multiplied at once and wherever the row sits
// in the batch. Chunked prefill, single-pass prefill and token-by-token
// decode (and MoE experts, which see varying row counts) rely on it to give
// the same logits. The property is checked against the one-row product,
// across the matrix-vector / GEMM switch and every GEMM tiling edge.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

constexpr int64_t kBatchSizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 37, 64, 100};
constexpr int64_t kMaxRows = 100;

// For each batch size m, multiplies m consecutive rows of a fresh random x
// starting at a varying offset, and compares every output row bitwise with
// that row multiplied alone.
void CheckRowInvariant(Ops& ops, const WeightMatrix& w, uint32_t seed) {
  const int64_t k = w.cols, n = w.rows;
  const int64_t pool = kMaxRows + 7;
  std::vector<float> x = testing::RandomFloats(pool * k, seed);
  // Some rows with large and tiny magnitudes, so rounding differences would show.
  for (int64_t c = 0; c < k; ++c) {
    x[3 * k + c] *= 1000.0f;
    x[5 * k + c] *= 1e-3f;
  }
  std::vector<float> single(pool * n);
  for (int64_t i = 0; i < pool; ++i) ops.MatMul(x.data() + i * k, 1, w, single.data() + i * n);
  std::vector<float> y;
  for (int64_t m : kBatchSizes) {
    const int64_t offset = (m * 5 + seed) % (pool - m + 1);
    y.assign(m * n + 1, NAN);
    y.back() = 4321.0f;
    ops.MatMul(x.data() + offset * k, m, w, y.data());
    for (int64_t i = 0; i < m; ++i) {
      const float* want = single.data() + (offset + i) * n;
      const float* got = y.data() + i * n;
      if (std::memcmp(want, got, n * sizeof(float)) != 0) {
        int64_t col = 0;
        while (std::memcmp(want + col, got + col, sizeof(float)) == 0) ++col;
        ADD_FAILURE() << w.Describe() << ": row " << offset + i << " at position " << i << " of m=" << m
                      << " differs from the one-row product at column " << col << ": " << got[col]
                      << " vs " << want[col];
        return;
      }
    }
    EXPECT_EQ(y.back(), 4321.0f) << "wrote past y";
  }
}

TEST(MatMulInvarianceTest, DenseAllDtypes) {
  auto ops = MakeCpuOps();
  uint32_t seed = 1;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t k : {1, 7, 16, 33, 100, 999}) {
      for (int64_t n : {1, 5, 31, 131, 300}) {
        const testing::TestWeights tw = testing::MakeDense(n, k, t, ++seed);
        CheckRowInvariant(*ops, tw.w, ++seed);
      }
    }
  }
}

TEST(MatMulInvarianceTest, DenseLongRows) {
  // Rows longer than any tile budget assumption, N not a multiple of the tile.
  auto ops = MakeCpuOps();
  const testing::TestWeights tw = testing::MakeDense(67, 5003, DType::kBF16, 3);
  CheckRowInvariant(*ops, tw.w, 4);
}

TEST(MatMulInvarianceTest, AffineAllBitsAndGroups) {
  auto ops = MakeCpuOps();
  std::mt19937 rng(11);
  uint32_t seed = 200;
  const DType scale_types[] = {DType::kBF16, DType::kF16, DType::kF32};
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int group : {32, 64, 128}) {
      const DType st = scale_types[rng() % 3];
      for (int64_t groups : {1, 7}) {
        for (int64_t n : {1, 45, 300}) {
          const testing::TestWeights tw = testing::MakeAffine(n, groups * group, bits, group, st, ++seed);
          CheckRowInvariant(*ops, tw.w, ++seed);
        }
      }
    }
  }
}

TEST(MatMulInvarianceTest, RowSliceMatchesFullMatrix) {
  // MoE experts and fused projections multiply row slices: the same rows
  // must give the same bits as part of the whole matrix, for any batch.
  auto ops = MakeCpuOps();
  const testing::TestWeights tw = testing::MakeAffine(90, 512, 4, 64, DType::kBF16, 42);
  const WeightMatrix slice = tw.w.RowSlice(29, 41);
  const std::vector<float> x = testing::RandomFloats(37 * 512, 43);
  std::vector<float> full(37 * 90), part(41);
  ops->MatMul(x.data(), 37, tw.w, full.data());
  for (int64_t i = 0; i < 37; ++i) {
    ops->MatMul(x.data() + i * 512, 1, slice, part.data());
    EXPECT_EQ(std::memcmp(part.data(), full.data() + i * 90 + 29, 41 * sizeof(float)), 0) << "row " << i;
  }
}

}  // namespace
}  // namespace g4
