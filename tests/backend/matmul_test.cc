// MatMul against a double-precision reference over every weight format,
// with sizes that are not multiples of any vector width or tile, on
// contiguous and strided views. Both the matrix-vector path (few input rows)
// and the blocked GEMM (many rows, K spanning several column tiles, N
// several row tiles) run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::kEps;

class MatMulTest : public testing::BackendTest {};

// y = x W^T in double from the exact weight values, and per output an error
// bound: float accumulation over K terms in kLanes >= 8 chains, then chain and
// group totals, is within (K/8 + 32) eps * sum |terms|; affine weights add the
// bound of quantizing x per group (backend_test_util.h).
void Reference(const std::vector<float>& x, int64_t m, const testing::TestWeights& tw,
               std::vector<double>* y, std::vector<double>* tol) {
  const int64_t n = tw.w.rows, k = tw.w.cols;
  y->assign(m * n, 0);
  tol->assign(m * n, 0);
  const int group = tw.w.is_affine() ? tw.w.group_size : 0;
  std::vector<double> xd(k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < k; ++c) xd[c] = x[i * k + c];
    for (int64_t r = 0; r < n; ++r) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < k; ++c) {
        s += static_cast<double>(x[i * k + c]) * tw.value[r * k + c];
        a += std::fabs(x[i * k + c]) * tw.magnitude[r * k + c];
      }
      (*y)[i * n + r] = s;
      (*tol)[i * n + r] = (k / 8.0 + 32) * kEps * a +
                          testing::QuantizedInputBound(xd.data(), nullptr, tw.magnitude.data() + r * k, k, group) +
                          1e-30;
    }
  }
}

// The CPU backend's integer scheme for affine weights
// (backend/cpu/affine_int8.h), written out from its documented formulas:
// per group, d = max|x| / 127 and q = round-half-even(x * (127 / max|x|))
// in float, then y = sum_g d_g (s_g sum c q + b_g sum q), here in double.
// The kernel's float evaluation of the last step (a rounded s * d and two
// fused multiply-adds per group) stays within (2 G + 4) eps of the sum of
// the terms' magnitudes; anything else it gets wrong (a code, a group, an
// input value) shows far above that.
void IntegerReference(const std::vector<float>& x, int64_t m, const testing::TestWeights& tw,
                      std::vector<double>* y, std::vector<double>* tol) {
  const int64_t n = tw.w.rows, k = tw.w.cols, group = tw.w.group_size, gpr = k / group;
  y->assign(m * n, 0);
  tol->assign(m * n, 0);
  std::vector<int32_t> q(k);
  std::vector<float> d(gpr), xs(gpr);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < gpr; ++g) {
      float amax = 0;
      for (int64_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(x[i * k + c]));
      d[g] = amax / 127.0f;
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      int32_t sum = 0;
      for (int64_t c = g * group; c < (g + 1) * group; ++c) {
        const float scaled = x[i * k + c] * inv;
        q[c] = static_cast<int32_t>(std::nearbyint(scaled));
        sum += q[c];
      }
      xs[g] = static_cast<float>(sum) * d[g];
    }
    for (int64_t r = 0; r < n; ++r) {
      double acc = 0, mag = 0;
      for (int64_t g = 0; g < gpr; ++g) {
        int64_t isum = 0;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) isum += static_cast<int64_t>(tw.code[r * k + c]) * q[c];
        const double t1 = static_cast<double>(isum) * (tw.group_scale[r * gpr + g] * d[g]);
        const double t2 = tw.group_bias[r * gpr + g] * xs[g];
        acc += t1 + t2;
        mag += std::fabs(t1) + std::fabs(t2);
      }
      (*y)[i * n + r] = acc;
      (*tol)[i * n + r] = (2.0 * gpr + 4) * kEps * mag + 1e-30;
    }
  }
}

// x and y strides: 0 = contiguous, else that many extra elements per row.
void CheckMatMul(Backend& backend, const testing::TestWeights& tw, int64_t m, uint32_t seed, int64_t x_pad = 0,
                 int64_t y_pad = 0) {
  const int64_t k = tw.w.cols, n = tw.w.rows;
  const std::vector<float> x = testing::RandomFloats(m * k, seed);
  const testing::DeviceWeights dw = testing::UploadWeights(backend, tw);
  testing::DeviceTensor dx = testing::UploadF32(backend, x, m, k, k + x_pad);
  testing::DeviceTensor dy = testing::AllocTensor(backend, DType::kF32, m, n, n + y_pad);
  backend.ops().MatMul(dx.view, dw.w, dy.view);
  std::vector<double> ref, tol;
  Reference(x, m, tw, &ref, &tol);
  const std::vector<float> got = testing::DownloadF32(backend, dy.view);
  EXPECT_TRUE(testing::AllWithin(ref, got, tol, n)) << tw.w.Describe() << " m=" << m << " pads " << x_pad << "," << y_pad;
  if (tw.w.is_affine() && backend.name() == "cpu") {
    IntegerReference(x, m, tw, &ref, &tol);
    EXPECT_TRUE(testing::AllWithin(ref, got, tol, n))
        << tw.w.Describe() << " m=" << m << " pads " << x_pad << "," << y_pad << " (integer scheme)";
  } else if (tw.w.is_affine()) {
    // The integer scheme fixes every float operation of an output: another
    // backend gives the CPU backend's bits.
    std::unique_ptr<Backend> cpu = testing::MakeBackend("cpu");
    const testing::DeviceWeights cw = testing::UploadWeights(*cpu, tw);
    testing::DeviceTensor cx = testing::UploadF32(*cpu, x, m, k);
    testing::DeviceTensor cy = testing::AllocTensor(*cpu, DType::kF32, m, n);
    cpu->ops().MatMul(cx.view, cw.w, cy.view);
    EXPECT_TRUE(testing::BitwiseEqual(testing::DownloadF32(*cpu, cy.view), got, n))
        << tw.w.Describe() << " m=" << m << " pads " << x_pad << "," << y_pad << " (the CPU backend's bits)";
  }
  EXPECT_TRUE(testing::GuardsIntact(backend, dy));
}

TEST(MatMulFixtureTest, TestWeightsAgreeWithDequantizeRow) {
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

TEST_P(MatMulTest, DenseAllDtypes) {
  uint32_t seed = 1;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t k : {1, 7, 64, 100, 999}) {
      for (int64_t n : {1, 5, 131, 300}) {
        const testing::TestWeights tw = testing::MakeDense(n, k, t, ++seed);
        for (int64_t m : {1, 2, 3, 4, 5, 17, 64}) CheckMatMul(backend(), tw, m, ++seed);
      }
    }
  }
}

TEST_P(MatMulTest, AffineAllBitsGroupsScaleTypes) {
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
          for (int64_t m : {1, 3, 4, 17}) CheckMatMul(backend(), tw, m, ++seed);
        }
      }
    }
  }
}

TEST_P(MatMulTest, StridedInputsAndOutputs) {
  // x a column slice of a wider activation, y written into a wider one: both
  // paths, dense and affine.
  uint32_t seed = 300;
  const testing::TestWeights dense = testing::MakeDense(45, 77, DType::kBF16, ++seed);
  const testing::TestWeights q4 = testing::MakeAffine(70, 256, 4, 64, DType::kBF16, ++seed);
  const testing::TestWeights q3 = testing::MakeAffine(33, 384, 3, 128, DType::kF16, ++seed);
  for (const testing::TestWeights* tw : {&dense, &q4, &q3}) {
    for (int64_t m : {1, 2, 4, 5, 19}) {
      CheckMatMul(backend(), *tw, m, ++seed, 13, 0);
      CheckMatMul(backend(), *tw, m, ++seed, 0, 7);
      CheckMatMul(backend(), *tw, m, ++seed, 64, 31);
    }
  }
}

TEST_P(MatMulTest, OneInputRowManyWeightRows) {
  // Batch-1 decode shapes: one input row against matrices of many rows
  // (every rows-per-warp layout of the CUDA one-row kernel), K over several
  // rounds of 32 units, every scale type.
  uint32_t seed = 700;
  const struct { int64_t n, k; int bits, group; DType scales; } kShapes[] = {{700, 2368, 4, 64, DType::kBF16},
                                                                           {2500, 640, 4, 32, DType::kF16},
                                                                           {8500, 384, 4, 128, DType::kF32},
                                                                           {1100, 1152, 8, 64, DType::kBF16},
                                                                           {3001, 192, 2, 64, DType::kBF16}};
  for (const auto& s : kShapes) {
    const testing::TestWeights w = testing::MakeAffine(s.n, s.k, s.bits, s.group, s.scales, ++seed);
    CheckMatMul(backend(), w, 1, ++seed);
  }
  // A few input rows with K staged in several chunks (33 and 50: the CUDA
  // few-row kernel in launches of 32 rows, a lone last row by the one-row kernel).
  const testing::TestWeights long_k = testing::MakeAffine(300, 6400, 4, 64, DType::kBF16, ++seed);
  for (int64_t m : {2, 5, 8, 13, 33, 50}) CheckMatMul(backend(), long_k, m, ++seed, m % 2 ? 3 : 0, 0);
}

// Calls f(i, bits, group, scale type) for every affine format, i counting
// from 0, the scale types taken in turn.
template <typename F>
void ForEveryAffineFormat(F f) {
  const DType scale_types[] = {DType::kBF16, DType::kF16, DType::kF32};
  int i = 0;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128}) f(i, bits, group, scale_types[i % 3]), ++i;
}

TEST_P(MatMulTest, OneInputRowEveryAffineFormatSeveralColumnTiles) {
  // Decode shapes of every format: K of 68 chunks of 32 columns (several
  // rounds or tiles of 32 chunks or groups, a partial last one), rows whose
  // codes, scales and biases start off 16-byte boundaries (3-, 5- and 6-bit
  // codes; 17 groups of 128), a row count that is no multiple of a warp's
  // or a block's rows.
  uint32_t seed = 1500;
  ForEveryAffineFormat([&](int i, int bits, int group, DType st) {
    const testing::TestWeights tw = testing::MakeAffine(301 + 11 * (i % 4), 2176, bits, group, st, ++seed);
    CheckMatMul(backend(), tw, 1, ++seed, i % 2 ? 5 : 0, 0);
  });
}

TEST_P(MatMulTest, ManyRowsUnevenSplits) {
  // More input rows than one tile pass, N smaller than a row tile: the GEMM
  // splits the rows across threads.
  CheckMatMul(backend(), testing::MakeDense(3, 333, DType::kBF16, 5), 203, 6);
  CheckMatMul(backend(), testing::MakeAffine(37, 1024, 4, 64, DType::kBF16, 7), 130, 8);
  CheckMatMul(backend(), testing::MakeAffine(300, 512, 8, 128, DType::kF16, 9), 66, 10, 5, 3);
}

TEST_P(MatMulTest, ManyInputRowsEveryAffineFormat) {
  // Prefill shapes (the CUDA tensor-core kernel's): several tiles of 64 input
  // rows and a partial last one, columns in tiles of 128 with a partial last
  // one, a partial last block of 128 weight rows; 20 rows: one partial tile of 32.
  uint32_t seed = 1300;
  ForEveryAffineFormat([&](int i, int bits, int group, DType st) {
    const int64_t k = group == 32 ? 416 : group == 64 ? 448 : 384;
    const testing::TestWeights tw = testing::MakeAffine(200 + 7 * (i % 5), k, bits, group, st, ++seed);
    CheckMatMul(backend(), tw, i % 3 == 0 ? 20 : 130, ++seed, i % 2 ? 3 : 0, 0);
  });
}

TEST_P(MatMulTest, RowSliceView) {
  // A RowSlice is a view into the middle of a matrix: results must match the
  // corresponding rows of the full product.
  for (int bits : {3, 4, 8}) {
    const testing::TestWeights tw = testing::MakeAffine(50, 256, bits, 32, DType::kBF16, 20 + bits);
    const testing::DeviceWeights dw = testing::UploadWeights(backend(), tw);
    const WeightMatrix slice = dw.w.RowSlice(13, 20);
    for (int64_t m : {1, 9}) {
      const std::vector<float> x = testing::RandomFloats(m * 256, 30 + m);
      testing::DeviceTensor dx = testing::UploadF32(backend(), x, m, 256);
      testing::DeviceTensor full = testing::AllocTensor(backend(), DType::kF32, m, 50);
      testing::DeviceTensor part = testing::AllocTensor(backend(), DType::kF32, m, 20);
      ops().MatMul(dx.view, dw.w, full.view);
      ops().MatMul(dx.view, slice, part.view);
      const std::vector<float> f = testing::DownloadF32(backend(), full.view.Cols(13, 20));
      EXPECT_TRUE(testing::BitwiseEqual(f, testing::DownloadF32(backend(), part.view), 20)) << bits << " m=" << m;
    }
  }
}

TEST_P(MatMulTest, ZeroRowsIsANoOp) {
  const testing::TestWeights tw = testing::MakeDense(4, 8, DType::kF32, 1);
  const testing::DeviceWeights dw = testing::UploadWeights(backend(), tw);
  testing::DeviceTensor dx = testing::AllocTensor(backend(), DType::kF32, 0, 8);
  testing::DeviceTensor dy = testing::AllocTensor(backend(), DType::kF32, 0, 4);
  ops().MatMul(dx.view, dw.w, dy.view);
  EXPECT_TRUE(testing::GuardsIntact(backend(), dy));
}

INSTANTIATE_TEST_SUITE_P(Backends, MatMulTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
