// Helpers for the CPU backend tests: weight matrices built from known values
// (so references never go through the code under test), and a tolerance
// check with a per-element bound that reports the worst element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/float16.h"
#include "io/weight_matrix.h"

namespace g4::testing {

constexpr double kEps = std::numeric_limits<float>::epsilon();

// Stores v as dtype t (F32, BF16 or F16) at element i of bytes; returns the
// value actually stored (rounded), as a float.
inline float StoreAs(DType t, std::vector<uint8_t>& bytes, size_t i, float v) {
  switch (t) {
    case DType::kF32:
      std::memcpy(bytes.data() + 4 * i, &v, 4);
      return v;
    case DType::kBF16: {
      const uint16_t h = F32ToBf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      return Bf16ToF32(h);
    }
    case DType::kF16: {
      const uint16_t h = F32ToF16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      return F16ToF32(h);
    }
    default: ADD_FAILURE() << "unsupported dtype";
  }
  return 0;
}

inline size_t ElemSize(DType t) { return t == DType::kF32 ? 4 : 2; }

// A weight matrix together with the exact value of every element.
struct TestWeights {
  WeightMatrix w;
  std::vector<double> value;  // [rows * cols], exactly what the stored bytes mean
  // Per element, |scale * q| + |bias| (affine) or |w| (dense): the size of the
  // terms a kernel adds, for error bounds.
  std::vector<double> magnitude;
  std::vector<uint8_t> data, scales, biases;
  std::vector<uint32_t> codes;
};

inline TestWeights MakeDense(int64_t rows, int64_t cols, DType t, uint32_t seed) {
  TestWeights tw;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  tw.data.resize(rows * cols * ElemSize(t) + 1);
  tw.value.resize(rows * cols);
  tw.magnitude.resize(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    tw.value[i] = StoreAs(t, tw.data, i, d(rng));
    tw.magnitude[i] = std::fabs(tw.value[i]);
  }
  tw.w.format = WeightMatrix::Format::kDense;
  tw.w.rows = rows;
  tw.w.cols = cols;
  tw.w.dtype = t;
  tw.w.data = tw.data.data();
  return tw;
}

// Packs codes the way the layout doc describes it (one LSB-first bit stream
// per row, written bit by bit: independent of the kernels' unpacking).
inline TestWeights MakeAffine(int64_t rows, int64_t cols, int bits, int group, DType scale_t,
                              uint32_t seed) {
  TestWeights tw;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> code(0, (1u << bits) - 1);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f), bias(-0.4f, 0.4f);
  const int64_t groups = cols / group, words = cols * bits / 32;
  tw.codes.assign(rows * words, 0);
  tw.scales.resize(rows * groups * ElemSize(scale_t));
  tw.biases.resize(rows * groups * ElemSize(scale_t));
  std::vector<double> s(rows * groups), b(rows * groups);
  for (int64_t i = 0; i < rows * groups; ++i) {
    // Negative scales occur in real checkpoints too.
    s[i] = StoreAs(scale_t, tw.scales, i, (rng() & 1 ? 1.0f : -1.0f) * scale(rng));
    b[i] = StoreAs(scale_t, tw.biases, i, bias(rng));
  }
  tw.value.resize(rows * cols);
  tw.magnitude.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t q = code(rng);
      for (int k = 0; k < bits; ++k) {
        const int64_t bit = c * bits + k;
        if (q >> k & 1) tw.codes[r * words + bit / 32] |= 1u << (bit % 32);
      }
      const int64_t gi = r * groups + c / group;
      tw.value[r * cols + c] = s[gi] * q + b[gi];
      tw.magnitude[r * cols + c] = std::fabs(s[gi] * q) + std::fabs(b[gi]);
    }
  }
  WeightMatrix& w = tw.w;
  w.format = WeightMatrix::Format::kAffine;
  w.rows = rows;
  w.cols = cols;
  w.bits = bits;
  w.group_size = group;
  w.codes = tw.codes.data();
  w.scale_dtype = scale_t;
  w.scales = tw.scales.data();
  w.biases = tw.biases.data();
  return tw;
}

// Passes when |actual[i] - expected[i]| <= tol[i] for every i; otherwise
// names the element with the largest error relative to its bound.
inline ::testing::AssertionResult AllWithin(const std::vector<double>& expected, const float* actual,
                                            const std::vector<double>& tol, int64_t row_len = 0) {
  size_t bad = 0, worst = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double ratio = std::isnan(err) ? INFINITY : err / tol[i];
    if (!(err <= tol[i])) ++bad;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream m;
  m.precision(9);
  m << bad << " of " << expected.size() << " elements out of tolerance; worst at index " << worst;
  if (row_len > 0) m << " (row " << worst / row_len << ", col " << worst % row_len << ")";
  m << ": expected " << expected[worst] << ", got " << actual[worst] << ", |diff| "
    << std::fabs(actual[worst] - expected[worst]) << " > tol " << tol[worst];
  return ::testing::AssertionFailure() << m.str();
}

}  // namespace g4::testing
