// MatMul must be row-invariant: the output for an input row is bit-identical
// whatever the number of rows multiplied at once, wherever the row sits in
// the batch and whatever the views' strides. Chunked prefill, single-pass
// prefill, decode, MoE experts (which see varying row counts) and batching
// of sequences rely on it. Checked against the one-row product, across the
// matrix-vector / GEMM switch and every GEMM tiling edge.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

class MatMulInvarianceTest : public testing::BackendTest {};

constexpr int64_t kBatchSizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 37, 64, 100};
constexpr int64_t kMaxRows = 100;

// For each batch size m, multiplies m consecutive rows of a fresh random x
// starting at a varying offset, and compares every output row bitwise with
// that row multiplied alone. Odd calls use strided views (x a column slice
// of a wider array, y written into a wider array).
void CheckRowInvariant(Backend& backend, const testing::TestWeights& tw, uint32_t seed) {
  Ops& ops = backend.ops();
  const testing::DeviceWeights dw = testing::UploadWeights(backend, tw);
  const int64_t k = tw.w.cols, n = tw.w.rows;
  const int64_t pool = kMaxRows + 7;
  std::vector<float> x = testing::RandomFloats(pool * k, seed);
  // Some rows with large and tiny magnitudes, so rounding differences would show.
  for (int64_t c = 0; c < k; ++c) {
    x[3 * k + c] *= 1000.0f;
    x[5 * k + c] *= 1e-3f;
  }
  testing::DeviceTensor dx = testing::UploadF32(backend, x, pool, k);
  testing::DeviceTensor wide_x = testing::UploadF32(backend, x, pool, k, k + 9);
  testing::DeviceTensor single = testing::AllocTensor(backend, DType::kF32, pool, n);
  for (int64_t i = 0; i < pool; ++i) ops.MatMul(dx.view.Rows(i, 1), dw.w, single.view.Rows(i, 1));
  const std::vector<float> want_all = testing::DownloadF32(backend, single.view);
  int call = 0;
  for (int64_t m : kBatchSizes) {
    const int64_t offset = (m * 5 + seed) % (pool - m + 1);
    const bool strided = ++call % 2 == 0;
    testing::DeviceTensor y = testing::AllocTensor(backend, DType::kF32, m, n, strided ? n + 5 : n);
    ops.MatMul((strided ? wide_x : dx).view.Rows(offset, m), dw.w, y.view);
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(want_all, n, offset, m),
                                      testing::DownloadF32(backend, y.view), n))
        << tw.w.Describe() << ": rows " << offset << ".. in a batch of m=" << m << (strided ? " (strided)" : "")
        << " differ from the one-row products";
    EXPECT_TRUE(testing::GuardsIntact(backend, y));
  }
}

TEST_P(MatMulInvarianceTest, DenseAllDtypes) {
  uint32_t seed = 1;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t k : {1, 7, 16, 33, 100, 999}) {
      for (int64_t n : {1, 5, 31, 131, 300}) {
        const testing::TestWeights w = testing::MakeDense(n, k, t, ++seed);
        CheckRowInvariant(backend(), w, ++seed);
      }
    }
  }
}

TEST_P(MatMulInvarianceTest, DenseLongRows) {
  // Rows longer than any tile budget assumption, N not a multiple of the tile.
  CheckRowInvariant(backend(), testing::MakeDense(67, 5003, DType::kBF16, 3), 4);
}

TEST_P(MatMulInvarianceTest, AffineAllBitsAndGroups) {
  std::mt19937 rng(11);
  uint32_t seed = 200;
  const DType scale_types[] = {DType::kBF16, DType::kF16, DType::kF32};
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int group : {32, 64, 128}) {
      const DType st = scale_types[rng() % 3];
      for (int64_t groups : {1, 7}) {
        for (int64_t n : {1, 45, 300}) {
          const testing::TestWeights w = testing::MakeAffine(n, groups * group, bits, group, st, ++seed);
          CheckRowInvariant(backend(), w, ++seed);
        }
      }
    }
  }
}

TEST_P(MatMulInvarianceTest, AffineManyWeightRows) {
  // Enough weight rows for every one-input-row layout of the CUDA kernel
  // (1, 2 and 4 rows per warp; 4 and 8 warps per block), K within one round
  // of units, beyond it, and beyond what the few-rows kernel stages at once:
  // one row's product equals its rows in any batch.
  struct Shape { int64_t n, k; int bits, group; DType st; };
  const Shape kShapes[] = {{700, 320, 4, 64, DType::kBF16},   {1100, 2368, 4, 64, DType::kBF16},
                           {2500, 320, 4, 32, DType::kF16},   {8500, 256, 4, 128, DType::kF32},
                           {2200, 256, 8, 128, DType::kBF16}, {8500, 96, 3, 32, DType::kBF16},
                           {300, 6400, 4, 64, DType::kBF16}};  // inputs staged in several chunks
  uint32_t seed = 900;
  for (const Shape& s : kShapes) {
    const testing::TestWeights w = testing::MakeAffine(s.n, s.k, s.bits, s.group, s.st, ++seed);
    CheckRowInvariant(backend(), w, ++seed);
  }
}

TEST_P(MatMulInvarianceTest, RowSliceMatchesFullMatrix) {
  // MoE experts and fused projections multiply row slices: the same rows
  // must give the same bits as part of the whole matrix, for any batch.
  const testing::TestWeights tw = testing::MakeAffine(90, 512, 4, 64, DType::kBF16, 42);
  const testing::DeviceWeights dw = testing::UploadWeights(backend(), tw);
  const WeightMatrix slice = dw.w.RowSlice(29, 41);
  testing::DeviceTensor x = testing::UploadF32(backend(), testing::RandomFloats(37 * 512, 43), 37, 512);
  testing::DeviceTensor full = testing::AllocTensor(backend(), DType::kF32, 37, 90);
  testing::DeviceTensor part = testing::AllocTensor(backend(), DType::kF32, 37, 41);
  ops().MatMul(x.view, dw.w, full.view);
  for (int64_t i = 0; i < 37; ++i) ops().MatMul(x.view.Rows(i, 1), slice, part.view.Rows(i, 1));
  EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(backend(), full.view.Cols(29, 41)),
                                    testing::DownloadF32(backend(), part.view), 41));
}

INSTANTIATE_TEST_SUITE_P(Backends, MatMulInvarianceTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
