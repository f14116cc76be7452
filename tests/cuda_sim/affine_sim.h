// What the affine MatMul emulator tests share: a random 4-bit product with
// bf16 scales and biases, random quantized input rows (QPos order, with
// their per-group d and xs), and the integer scheme of affine_int8.cuh
// computed plainly on the host, the reference every kernel must give bit
// for bit. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/affine_int8.cuh"
#include "core/float16.h"

namespace g4::cuda::sim {

// One 4-bit product with bf16 scales and biases; codes 16-byte aligned rows
// (cols a multiple of 32). y holds NaN until a kernel writes it, ldy apart.
struct Product {
  int64_t rows, cols, ldy;
  int group;
  std::vector<uint32_t> codes;  // rows x cols / 8 words
  std::vector<uint16_t> scales, biases;
  std::vector<float> y;
  Product(int64_t r, int64_t c, int g, std::mt19937& rng, int64_t y_rows = 1) : rows(r), cols(c), ldy(r), group(g) {
    codes.resize(static_cast<size_t>(r * c / 8));
    for (uint32_t& w : codes) w = static_cast<uint32_t>(rng());
    std::normal_distribution<float> n(0.0f, 0.02f);
    scales.resize(static_cast<size_t>(r * (c / g)));
    biases.resize(scales.size());
    for (uint16_t& s : scales) s = g4::F32ToBf16(n(rng));
    for (uint16_t& b : biases) b = g4::F32ToBf16(n(rng) * 8.0f);
    y.assign(static_cast<size_t>(r * y_rows), std::nanf(""));
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
  AffineOut Out() { return AffineOut{Dev(), y.data(), ldy}; }
};

// `rows` quantized input rows in QPos order, and their per-group d and xs.
struct QuantizedRows {
  int64_t cols, groups;
  std::vector<int8_t> q;
  std::vector<float> d, xs;
  QuantizedRows(int64_t rows, int64_t c, int group, std::mt19937& rng) : cols(c), groups(c / group) {
    std::uniform_int_distribution<int> code(-127, 127);
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    q.resize(static_cast<size_t>(rows * cols));
    for (int8_t& v : q) v = static_cast<int8_t>(code(rng));
    d.resize(static_cast<size_t>(rows * groups));
    xs.resize(d.size());
    for (size_t g = 0; g < d.size(); ++g) d[g] = u(rng), xs[g] = u(rng) * code(rng);
  }
  QRows View() { return QRows{q.data(), cols, d.data(), xs.data(), groups}; }
};

// The integer scheme of affine_int8.cuh: row r of p times input row m.
inline float Reference(const Product& p, const QuantizedRows& in, int64_t m, int64_t r) {
  float y = 0.0f;
  const int8_t* q = in.q.data() + m * in.cols;
  for (int64_t g = 0; g < p.cols / p.group; ++g) {
    int32_t isum = 0;
    for (int64_t c = g * p.group; c < (g + 1) * p.group; ++c) {
      const int code = static_cast<int>((p.codes[static_cast<size_t>(r * p.cols / 8 + c / 8)] >> (4 * (c % 8))) & 15u);
      const int64_t o = c & 7, qpos = c - o + ((o & 1) ? 4 + (o >> 1) : (o >> 1));
      isum += code * q[qpos];
    }
    const size_t gi = static_cast<size_t>(r * (p.cols / p.group) + g);
    const size_t mg = static_cast<size_t>(m * in.groups + g);
    const float sd = g4::Bf16ToF32(p.scales[gi]) * in.d[mg];
    y = std::fmaf(static_cast<float>(isum), sd, y);
    y = std::fmaf(g4::Bf16ToF32(p.biases[gi]), in.xs[mg], y);
  }
  return y;
}

// Output y[m * p.ldy + r] against Reference(p, in, m, r), bit for bit, for
// input rows [0, m_rows) (m_in: the input row of output row m).
template <typename InRow>
void ExpectOutputsGiveTheScheme(const Product& p, const QuantizedRows& in, int64_t m_rows, InRow m_in,
                                const char* what) {
  for (int64_t m = 0; m < m_rows; ++m)
    for (int64_t r = 0; r < p.rows; ++r) {
      const float want = Reference(p, in, m_in(m), r), got = p.y[static_cast<size_t>(m * p.ldy + r)];
      uint32_t a, b;
      std::memcpy(&a, &want, 4);
      std::memcpy(&b, &got, 4);
      ASSERT_EQ(a, b) << what << ": output row " << m << ", weight row " << r << ": " << got << " against " << want;
    }
}

}  // namespace g4::cuda::sim
