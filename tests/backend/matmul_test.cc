// MatMul against a double-precision reference over every weight format the
// backend supports, with sizes that are not multiples of any vector width or
// tile. Both the matrix-vector path (few input rows) and the blocked GEMM
// (many rows, K spanning several column tiles, N several row tiles) run.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"
#include "test_util.h"

namespace g4 {
namespace {

using testing::AllWithin;
using testing::kEps;

// y = x W^T in double from the exact weight values, and per output an error
// bound: float accumulation over K terms in kLanes >= 8 chains, then chain and
// group totals, is within (K/8 + 32) eps * sum |terms|.
void Reference(const std::vector<float>& x, int64_t m, const testing::TestWeights& tw,
               std::vector<double>* y, std::vector<double>* tol) {
  const int64_t n = tw.w.rows, k = tw.w.cols;
  y->assign(m * n, 0);
  tol->assign(m * n, 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < k; ++c) {
        s += static_cast<double>(x[i * k + c]) * tw.value[r * k + c];
        a += std::fabs(x[i * k + c]) * tw.magnitude[r * k + c];
      }
      (*y)[i * n + r] = s;
      (*tol)[i * n + r] = (k / 8.0 + 32) * kEps * a + 1e-30;
    }
  }
}

void CheckMatMul(Ops& ops, const testing::TestWeights& tw, int64_t m, uint32_t seed) {
  const std::vector<float> x = testing::RandomFloats(m * tw.w.cols, seed);
  std::vector<float> y(m * tw.w.rows + 1, NAN);
  y.back() = 12345.0f;  // guard: must stay untouched
  ops.MatMul(x.data(), m, tw.w, y.data());
  std::vector<double> ref, tol;
  Reference(x, m, tw, &ref, &tol);
  EXPECT_TRUE(AllWithin(ref, y.data(), tol, tw.w.rows)) << tw.w.Describe() << " m=" << m;
  EXPECT_EQ(y.back(), 12345.0f) << "wrote past y";
}

TEST(MatMulTest, TestWeightsAgreeWithDequantizeRow) {
  // The fixture's packing and io's reference semantics must agree, or the
  // references below would test the wrong thing.
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    const testing::TestWeights tw = testing::MakeAffine(3, 256, bits, 64, DType::kBF16, bits);
    std::vector<float> row(256);
    for (int64_t r = 0; r < 3; ++r) {
      DequantizeRow(tw.w, r, row.data());
      for (int64_t c = 0; c < 256; ++c) ASSERT_EQ(row[c], tw.value[r * 256 + c]) << bits << " " << r << " " << c;
    }
  }
}

TEST(MatMulTest, DenseAllDtypes) {
  auto ops = MakeCpuOps();
  uint32_t seed = 1;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t k : {1, 7, 64, 100, 999}) {
      for (int64_t n : {1, 5, 131, 300}) {
        const testing::TestWeights tw = testing::MakeDense(n, k, t, ++seed);
        for (int64_t m : {1, 2, 3, 4, 5, 17, 64}) CheckMatMul(*ops, tw, m, ++seed);
      }
    }
  }
}

TEST(MatMulTest, AffineAllBitsGroupsScaleTypes) {
  auto ops = MakeCpuOps();
  std::mt19937 rng(7);
  uint32_t seed = 100;
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int group : {32, 64, 128}) {
      for (DType st : {DType::kBF16, DType::kF16, DType::kF32}) {
        // One small shape and one spanning several GEMM tiles in both K and N.
        const int64_t k_small = group * (1 + rng() % 2);
        const int64_t k_large = (600 + rng() % 400) / group * group;
        const int64_t n_small = 1 + rng() % 7, n_large = 129 + rng() % 172;
        for (auto [k, n] : {std::pair{k_small, n_small}, std::pair{k_large, n_large}}) {
          const testing::TestWeights tw = testing::MakeAffine(n, k, bits, group, st, ++seed);
          for (int64_t m : {1, 3, 4, 17}) CheckMatMul(*ops, tw, m, ++seed);
        }
      }
    }
  }
}

TEST(MatMulTest, ManyRowsUnevenSplits) {
  // More input rows than one tile pass, N smaller than a row tile: the GEMM
  // splits the rows across threads.
  auto ops = MakeCpuOps();
  const testing::TestWeights dense = testing::MakeDense(3, 333, DType::kBF16, 5);
  CheckMatMul(*ops, dense, 203, 6);
  const testing::TestWeights q4 = testing::MakeAffine(37, 1024, 4, 64, DType::kBF16, 7);
  CheckMatMul(*ops, q4, 130, 8);
  const testing::TestWeights q8 = testing::MakeAffine(300, 512, 8, 128, DType::kF16, 9);
  CheckMatMul(*ops, q8, 66, 10);
}

TEST(MatMulTest, RowSliceView) {
  // A RowSlice is a view into the middle of a matrix: results must match the
  // corresponding rows of the full product.
  auto ops = MakeCpuOps();
  for (int bits : {3, 4, 8}) {
    const testing::TestWeights tw = testing::MakeAffine(50, 256, bits, 32, DType::kBF16, 20 + bits);
    const WeightMatrix slice = tw.w.RowSlice(13, 20);
    for (int64_t m : {1, 9}) {
      const std::vector<float> x = testing::RandomFloats(m * 256, 30 + m);
      std::vector<float> full(m * 50), part(m * 20);
      ops->MatMul(x.data(), m, tw.w, full.data());
      ops->MatMul(x.data(), m, slice, part.data());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < 20; ++r) EXPECT_EQ(part[i * 20 + r], full[i * 50 + 13 + r]) << bits << " " << i << " " << r;
    }
  }
}

TEST(MatMulTest, ZeroRowsIsANoOp) {
  auto ops = MakeCpuOps();
  const testing::TestWeights tw = testing::MakeDense(4, 8, DType::kF32, 1);
  float y = 7.0f;
  ops->MatMul(nullptr, 0, tw.w, &y);
  EXPECT_EQ(y, 7.0f);
}

}  // namespace
}  // namespace g4
