// The one-row MatMul on the int8 tensor cores (affine_int8_row_mma.cu) on
// the SIMT emulator (include/simt.h), without a GPU: random 4-bit codes,
// bf16 scales and biases and a random quantized input row against the
// integer scheme of affine_int8.cuh computed here, bit for bit. Integer
// mma sums are exact on the hardware and in the emulator alike, so these
// are the hardware's bits too; tests/backend runs the kernel on a GPU
// against the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "affine_sim.h"

namespace g4::cuda {
namespace {

using sim::Product;
using sim::QuantizedRows;

void ExpectKernelGivesTheScheme(int group, int groups, std::vector<int64_t> rows, uint32_t seed) {
  SCOPED_TRACE("group " + std::to_string(group) + ", groups " + std::to_string(groups));
  std::mt19937 rng(seed);
  const int64_t cols = static_cast<int64_t>(group) * groups;
  std::vector<Product> ps;
  for (int64_t r : rows) ps.emplace_back(r, cols, group, rng);
  QuantizedRows in(1, cols, group, rng);
  std::vector<AffineOut> outs;
  for (Product& p : ps) outs.push_back(p.Out());
  ASSERT_TRUE(AffineInt8RowMmaMatMulTakes(outs, 4));
  EXPECT_FALSE(AffineInt8RowMmaMatMulTakes(outs, 8));
  AffineInt8RowMmaMatMul(outs, 4, in.View(), nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    sim::ExpectOutputsGiveTheScheme(ps[i], in, 1, [](int64_t) { return int64_t{0}; },
                                    ("product " + std::to_string(i)).c_str());
}

// A device table (the MoE experts of a decode step): products of one row
// count, each multiplying its own quantized input row.
void ExpectTableGivesTheScheme(int group, int groups, int64_t rows, std::vector<int> in_rows, uint32_t seed) {
  SCOPED_TRACE("table: group " + std::to_string(group) + ", groups " + std::to_string(groups));
  std::mt19937 rng(seed);
  const int64_t cols = static_cast<int64_t>(group) * groups;
  std::vector<Product> ps;
  for (size_t i = 0; i < in_rows.size(); ++i) ps.emplace_back(rows, cols, group, rng);
  QuantizedRows in(2, cols, group, rng);
  std::vector<RowProduct> table;
  for (size_t i = 0; i < ps.size(); ++i) {
    const int32_t first = static_cast<int32_t>(i * rows);
    table.push_back(RowProduct{reinterpret_cast<const uint8_t*>(ps[i].codes.data()), ps[i].scales.data(),
                               ps[i].biases.data(), ps[i].y.data(), cols / 2, first,
                               first + static_cast<int32_t>(rows), kSBF16, 1, in_rows[i]});
  }
  ASSERT_TRUE(AffineInt8RowMmaMatMulTableTakes(4, group, cols, kSBF16, true));
  EXPECT_FALSE(AffineInt8RowMmaMatMulTableTakes(4, group, cols, kSBF16, false));
  AffineInt8RowMmaMatMulTable(table.data(), static_cast<int>(table.size()), static_cast<int32_t>(rows), 4, group,
                              cols, kSBF16, true, in.View(), nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    sim::ExpectOutputsGiveTheScheme(ps[i], in, 1, [&](int64_t) { return int64_t{in_rows[i]}; },
                                    ("product " + std::to_string(i)).c_str());
}

// The few-row kernel: `m` input rows (2 to 32) times products of `rows` rows.
void ExpectFewRowKernelGivesTheScheme(int64_t m, int group, int groups, std::vector<int64_t> rows, uint32_t seed) {
  SCOPED_TRACE("few rows: " + std::to_string(m) + " input rows, group " + std::to_string(group) + " x " +
               std::to_string(groups));
  std::mt19937 rng(seed);
  const int64_t cols = static_cast<int64_t>(group) * groups;
  std::vector<Product> ps;
  for (int64_t r : rows) ps.emplace_back(r, cols, group, rng, m);
  QuantizedRows in(m, cols, group, rng);
  std::vector<AffineOut> outs;
  for (Product& p : ps) outs.push_back(p.Out());
  ASSERT_TRUE(AffineInt8RowsMmaMatMulTakes(outs, 4, m));
  EXPECT_FALSE(AffineInt8RowsMmaMatMulTakes(outs, 4, 33));
  EXPECT_FALSE(AffineInt8RowsMmaMatMulTakes(outs, 4, 1));
  AffineInt8RowsMmaMatMul(outs, 4, in.View(), m, nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    sim::ExpectOutputsGiveTheScheme(ps[i], in, m, [](int64_t r) { return r; },
                                    ("product " + std::to_string(i)).c_str());
}

TEST(AffineInt8RowMmaSim, GivesTheIntegerSchemesBits) {
  // Groups of 64 (Gemma's): a tile with a tail, two products in one launch,
  // more groups than the warps take in one pass of their slots.
  ExpectKernelGivesTheScheme(64, 45, {37, 16}, 1);
  // Fewer groups than warps (some warps have none), one row.
  ExpectKernelGivesTheScheme(64, 5, {1}, 2);
  ExpectKernelGivesTheScheme(32, 27, {19}, 3);
  ExpectKernelGivesTheScheme(128, 11, {16, 9, 3}, 4);
}

TEST(AffineInt8RowMmaSim, FewRowsGiveTheIntegerSchemesBits) {
  // Groups of 64: two passes, the second short (45 = 32 + 13), two products
  // with short last tiles.
  ExpectFewRowKernelGivesTheScheme(8, 64, 45, {37, 16}, 11);
  // Odd row counts (columns of B discarded), passes whose last warps have
  // no group, one pass exactly full.
  ExpectFewRowKernelGivesTheScheme(3, 64, 5, {20}, 12);
  ExpectFewRowKernelGivesTheScheme(2, 32, 32, {16}, 13);
  ExpectFewRowKernelGivesTheScheme(5, 128, 70, {9, 3}, 14);
  ExpectFewRowKernelGivesTheScheme(7, 32, 97, {48}, 15);
  // Two and four column tiles of 8 input rows (passes of 32 and 16 groups).
  ExpectFewRowKernelGivesTheScheme(12, 64, 40, {33}, 16);
  ExpectFewRowKernelGivesTheScheme(16, 32, 33, {16, 7}, 17);
  ExpectFewRowKernelGivesTheScheme(32, 64, 37, {40}, 18);
  ExpectFewRowKernelGivesTheScheme(19, 128, 17, {21}, 19);
  // More blocks than two an SM take and no more than three (the emulator
  // reports 132 SMs): the one-buffer instance, whose second barrier keeps
  // a pass's stores behind the previous pass's fold.
  ExpectFewRowKernelGivesTheScheme(32, 64, 20, {4800}, 20);
  ExpectFewRowKernelGivesTheScheme(23, 32, 17, {4000, 790}, 21);
}

TEST(AffineInt8RowMmaSim, DeviceTablesGiveTheIntegerSchemesBits) {
  ExpectTableGivesTheScheme(64, 22, 37, {1, 0, 1}, 5);
  ExpectTableGivesTheScheme(32, 9, 8, {0, 1}, 6);
}

}  // namespace
}  // namespace g4::cuda
