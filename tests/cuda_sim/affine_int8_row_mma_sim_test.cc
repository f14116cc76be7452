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
#include "core/float16.h"

namespace g4::cuda {
namespace {

// One 4-bit product with bf16 scales and biases; codes 16-byte aligned rows.
struct Product {
  int64_t rows, cols;
  int group;
  std::vector<uint32_t> codes;  // rows x cols / 8 words
  std::vector<uint16_t> scales, biases;
  std::vector<float> y;
  Product(int64_t r, int64_t c, int g, std::mt19937& rng) : rows(r), cols(c), group(g) {
    codes.resize(static_cast<size_t>(r * c / 8));
    for (uint32_t& w : codes) w = static_cast<uint32_t>(rng());
    std::normal_distribution<float> n(0.0f, 0.02f);
    scales.resize(static_cast<size_t>(r * (c / g)));
    biases.resize(scales.size());
    for (uint16_t& s : scales) s = g4::F32ToBf16(n(rng));
    for (uint16_t& b : biases) b = g4::F32ToBf16(n(rng) * 8.0f);
    y.assign(static_cast<size_t>(r), std::nanf(""));
  }
  DevWeight Dev() const {
    DevWeight w;
    w.data = codes.data();
    w.scales = scales.data();
    w.biases = biases.data();
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = cols / 2;
    w.groups_per_row = cols / group;
    w.group = group;
    w.scale_type = kSBF16;
    w.vec16 = true;
    return w;
  }
};

// A quantized input row in QPos order, and its per-group d and xs.
struct Input {
  std::vector<int8_t> q;
  std::vector<float> d, xs;
  Input(int64_t cols, int group, std::mt19937& rng) {
    std::uniform_int_distribution<int> c(-127, 127);
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    q.resize(static_cast<size_t>(cols));
    for (int8_t& v : q) v = static_cast<int8_t>(c(rng));
    d.resize(static_cast<size_t>(cols / group));
    xs.resize(d.size());
    for (size_t g = 0; g < d.size(); ++g) d[g] = u(rng), xs[g] = u(rng) * c(rng);
  }
};

// The integer scheme of affine_int8.cuh for row r of p.
float Reference(const Product& p, const Input& in, int64_t r) {
  float y = 0.0f;
  for (int64_t g = 0; g < p.cols / p.group; ++g) {
    int32_t isum = 0;
    for (int64_t c = g * p.group; c < (g + 1) * p.group; ++c) {
      const int code = static_cast<int>((p.codes[static_cast<size_t>(r * p.cols / 8 + c / 8)] >> (4 * (c % 8))) & 15u);
      const int64_t o = c & 7, qpos = c - o + ((o & 1) ? 4 + (o >> 1) : (o >> 1));
      isum += code * in.q[static_cast<size_t>(qpos)];
    }
    const size_t gi = static_cast<size_t>(r * (p.cols / p.group) + g);
    const float sd = g4::Bf16ToF32(p.scales[gi]) * in.d[static_cast<size_t>(g)];
    y = std::fmaf(static_cast<float>(isum), sd, y);
    y = std::fmaf(g4::Bf16ToF32(p.biases[gi]), in.xs[static_cast<size_t>(g)], y);
  }
  return y;
}

void ExpectKernelGivesTheScheme(int group, int groups, std::vector<int64_t> rows, uint32_t seed) {
  SCOPED_TRACE("group " + std::to_string(group) + ", groups " + std::to_string(groups));
  std::mt19937 rng(seed);
  const int64_t cols = static_cast<int64_t>(group) * groups;
  std::vector<Product> ps;
  for (int64_t r : rows) ps.emplace_back(r, cols, group, rng);
  Input in(cols, group, rng);
  QRows qr;
  qr.q = in.q.data();
  qr.ldq = cols;
  qr.d = in.d.data();
  qr.xs = in.xs.data();
  qr.ldg = groups;
  std::vector<AffineOut> outs;
  for (Product& p : ps) outs.push_back(AffineOut{p.Dev(), p.y.data(), static_cast<int64_t>(p.rows)});
  ASSERT_TRUE(AffineInt8RowMmaMatMulTakes(outs, 4));
  EXPECT_FALSE(AffineInt8RowMmaMatMulTakes(outs, 8));
  AffineInt8RowMmaMatMul(outs, 4, qr, nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    for (int64_t r = 0; r < ps[i].rows; ++r) {
      const float want = Reference(ps[i], in, r), got = ps[i].y[static_cast<size_t>(r)];
      uint32_t a, b;
      std::memcpy(&a, &want, 4);
      std::memcpy(&b, &got, 4);
      ASSERT_EQ(a, b) << "product " << i << " row " << r << ": " << got << " against " << want;
    }
}

// A device table (the MoE experts of a decode step): products of one row
// count, each multiplying its own quantized input row.
void ExpectTableGivesTheScheme(int group, int groups, int64_t rows, std::vector<int> in_rows, uint32_t seed) {
  SCOPED_TRACE("table: group " + std::to_string(group) + ", groups " + std::to_string(groups));
  std::mt19937 rng(seed);
  const int64_t cols = static_cast<int64_t>(group) * groups;
  std::vector<Product> ps;
  std::vector<Input> ins;
  for (size_t i = 0; i < in_rows.size(); ++i) ps.emplace_back(rows, cols, group, rng);
  for (int i = 0; i < 2; ++i) ins.emplace_back(cols, group, rng);
  std::vector<int8_t> q;  // the two rows as one QRows
  std::vector<float> d, xs;
  for (const Input& in : ins) {
    q.insert(q.end(), in.q.begin(), in.q.end());
    d.insert(d.end(), in.d.begin(), in.d.end());
    xs.insert(xs.end(), in.xs.begin(), in.xs.end());
  }
  const QRows qr{q.data(), cols, d.data(), xs.data(), groups};
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
                              cols, kSBF16, true, qr, nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    for (int64_t r = 0; r < rows; ++r) {
      const float want = Reference(ps[i], ins[static_cast<size_t>(in_rows[i])], r), got = ps[i].y[static_cast<size_t>(r)];
      uint32_t a, b;
      std::memcpy(&a, &want, 4);
      std::memcpy(&b, &got, 4);
      ASSERT_EQ(a, b) << "product " << i << " row " << r << ": " << got << " against " << want;
    }
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

TEST(AffineInt8RowMmaSim, DeviceTablesGiveTheIntegerSchemesBits) {
  ExpectTableGivesTheScheme(64, 22, 37, {1, 0, 1}, 5);
  ExpectTableGivesTheScheme(32, 9, 8, {0, 1}, 6);
}

}  // namespace
}  // namespace g4::cuda
