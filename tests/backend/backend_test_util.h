// Helpers for the backend test suite (tests/backend, and any layer's tests
// that run ops): a fixture parameterized over the registered backends,
// tensors in backend memory with guard bytes around them (uploaded, read
// back and checked only through Backend copies, never touched directly),
// weight matrices built from known values (so references never go through
// the code under test) and placed in backend memory, and comparisons that
// report the worst element (tolerance) or the first differing one (bitwise).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/ops.h"
#include "backend_registry.h"
#include "core/dtype.h"
#include "core/float16.h"
#include "io/weight_matrix.h"
#include "test_util.h"

namespace g4::testing {

// gelu with the tanh approximation, in double: the references' activation.
inline double GeluTanhRef(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

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
  // Affine: the stored scale and bias of every group [rows * cols / group],
  // and every code [rows * cols].
  std::vector<double> group_scale, group_bias;
  std::vector<uint32_t> code;
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
  std::vector<double>& s = tw.group_scale;
  std::vector<double>& b = tw.group_bias;
  s.resize(rows * groups);
  b.resize(rows * groups);
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
      tw.code.push_back(q);
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

// MatMul over affine weights may quantize each input row per weight group
// to int8 (the CPU backend does: d = max |x| / 127 over the group, values
// rounded to multiples of d; backend/cpu/affine_int8.h). The extra error
// of one output is then at most sum_g (d_g / 2) sum_{k in g} |w_k|: the
// bound below, for input x (with per-element uncertainty x_err, when x is
// itself a computed value) and weight magnitudes w_abs (one row). Zero for
// dense weights (group 0).
inline double QuantizedInputBound(const double* x, const double* x_err, const double* w_abs, int64_t k,
                                  int group) {
  if (group <= 0) return 0;
  double bound = 0;
  for (int64_t g0 = 0; g0 < k; g0 += group) {
    double amax = 0, wsum = 0;
    for (int64_t c = g0; c < g0 + group; ++c) {
      amax = std::max(amax, std::fabs(x[c]) + (x_err ? x_err[c] : 0.0));
      wsum += w_abs[c];
    }
    bound += amax / 254.0 * (1 + 1e-5) * wsum;
  }
  return bound;
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

// ---------------------------------------------------------------------------
// Backends and device memory.

// Base fixture: one fresh backend per test, named by the test parameter.
//   class MyOpTest : public BackendTest {};
//   TEST_P(MyOpTest, ...) { ... ops().MatMul(...) ... }
//   INSTANTIATE_TEST_SUITE_P(Backends, MyOpTest, BackendValues(), BackendParamName);
class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = MakeBackend(GetParam());
    ASSERT_NE(backend_, nullptr);
  }
  Backend& backend() { return *backend_; }
  Ops& ops() { return backend_->ops(); }

  std::unique_ptr<Backend> backend_;
};

// Byte every guard and padding byte holds: NaN as F32, -1 as I32.
constexpr uint8_t kGuardByte = 0xFF;
// Elements past the last row that must stay untouched.
constexpr int64_t kGuardElements = 37;

// A [rows, cols] tensor in backend memory, rows `view.stride` elements
// apart. Everything outside the view (row padding and kGuardElements past
// the end) starts as kGuardByte; GuardsIntact checks it still is.
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
  size_t total_bytes = 0;
};

// A fresh tensor, every byte kGuardByte (so unwritten outputs read as NaN).
// stride 0 means cols.
inline DeviceTensor AllocTensor(Backend& backend, DType dtype, int64_t rows, int64_t cols, int64_t stride = 0) {
  if (stride == 0) stride = cols;
  DeviceTensor t;
  const size_t elem = DTypeSize(dtype);
  const int64_t elements = (rows > 0 ? (rows - 1) * stride + cols : 0) + kGuardElements;
  t.total_bytes = static_cast<size_t>(elements) * elem;
  StatusOr<DeviceBuffer> buffer = backend.Allocate(t.total_bytes, "test tensor");
  EXPECT_TRUE(buffer.ok()) << buffer.status().message();
  if (!buffer.ok()) return t;
  t.buffer = std::move(buffer).value();
  const std::vector<uint8_t> fill(t.total_bytes, kGuardByte);
  backend.CopyToDevice(t.buffer.data(), fill.data(), t.total_bytes);
  backend.Sync();
  t.view = TensorView{t.buffer.data(), dtype, rows, cols, stride, backend.space()};
  return t;
}

// Writes dense host rows ([view.rows, view.cols] of T) into the view.
template <typename T>
void WriteRows(Backend& backend, const TensorView& view, const std::vector<T>& host) {
  ASSERT_EQ(sizeof(T), view.element_bytes());
  ASSERT_EQ(host.size(), static_cast<size_t>(view.rows * view.cols));
  for (int64_t r = 0; r < view.rows; ++r)
    backend.CopyToDevice(view.at(r, 0), host.data() + r * view.cols, view.cols * sizeof(T));
  backend.Sync();
}

// A new tensor holding dense host rows (stride 0 means cols).
template <typename T>
DeviceTensor Upload(Backend& backend, DType dtype, const std::vector<T>& host, int64_t rows, int64_t cols,
                    int64_t stride = 0) {
  DeviceTensor t = AllocTensor(backend, dtype, rows, cols, stride);
  if (t.buffer.data() != nullptr) WriteRows(backend, t.view, host);
  return t;
}
inline DeviceTensor UploadF32(Backend& backend, const std::vector<float>& host, int64_t rows, int64_t cols,
                              int64_t stride = 0) {
  return Upload(backend, DType::kF32, host, rows, cols, stride);
}
inline DeviceTensor UploadI32(Backend& backend, const std::vector<int32_t>& host, int64_t rows, int64_t cols,
                              int64_t stride = 0) {
  return Upload(backend, DType::kI32, host, rows, cols, stride);
}

// The view's rows, dense, read back through CopyToHost + Sync.
template <typename T>
std::vector<T> Download(Backend& backend, const TensorView& view) {
  std::vector<T> host(static_cast<size_t>(view.rows * view.cols));
  EXPECT_EQ(sizeof(T), view.element_bytes());
  for (int64_t r = 0; r < view.rows; ++r)
    backend.CopyToHost(host.data() + r * view.cols, view.at(r, 0), view.cols * sizeof(T));
  backend.Sync();
  return host;
}
inline std::vector<float> DownloadF32(Backend& backend, const TensorView& view) {
  return Download<float>(backend, view);
}
inline std::vector<int32_t> DownloadI32(Backend& backend, const TensorView& view) {
  return Download<int32_t>(backend, view);
}

// Every byte of the tensor outside its view still holds kGuardByte.
inline ::testing::AssertionResult GuardsIntact(Backend& backend, const DeviceTensor& t) {
  std::vector<uint8_t> all(t.total_bytes);
  backend.CopyToHost(all.data(), t.buffer.data(), t.total_bytes);
  backend.Sync();
  const size_t elem = t.view.element_bytes();
  const size_t row_bytes = t.view.cols * elem, stride_bytes = t.view.stride * elem;
  for (size_t i = 0; i < all.size(); ++i) {
    const size_t r = i / stride_bytes, in_row = i % stride_bytes;
    const bool inside = static_cast<int64_t>(r) < t.view.rows && in_row < row_bytes;
    if (!inside && all[i] != kGuardByte) {
      return ::testing::AssertionFailure()
             << "byte " << i << " outside the view was written (view " << t.view.rows << "x" << t.view.cols
             << ", stride " << t.view.stride << ", element " << elem << " bytes)";
    }
  }
  return ::testing::AssertionSuccess();
}

// A host array in backend memory (ids, positions, weight vectors).
template <typename T>
DeviceBuffer UploadArray(Backend& backend, const std::vector<T>& host) {
  StatusOr<DeviceBuffer> b = UploadConstant(backend, host.data(), host.size() * sizeof(T), "test array");
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(b).value() : DeviceBuffer();
}

// A test weight matrix copied into backend memory: `w` points there.
struct DeviceWeights {
  WeightMatrix w;
  std::vector<DeviceBuffer> buffers;
};

inline DeviceWeights UploadWeights(Backend& backend, const TestWeights& tw) {
  DeviceWeights d;
  d.w = tw.w;
  auto put = [&](const void* data, size_t bytes) -> const void* {
    if (bytes == 0) return nullptr;
    StatusOr<DeviceBuffer> b = UploadConstant(backend, data, bytes, "test weights");
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return nullptr;
    d.buffers.push_back(std::move(b).value());
    return d.buffers.back().data();
  };
  if (tw.w.is_affine()) {
    d.w.codes = static_cast<const uint32_t*>(put(tw.codes.data(), tw.codes.size() * sizeof(uint32_t)));
    d.w.scales = put(tw.scales.data(), tw.scales.size());
    d.w.biases = put(tw.biases.data(), tw.biases.size());
  } else {
    d.w.data = put(tw.data.data(), tw.data.size());
  }
  return d;
}

// ---------------------------------------------------------------------------
// Comparisons.

inline ::testing::AssertionResult AllWithin(const std::vector<double>& expected, const std::vector<float>& actual,
                                            const std::vector<double>& tol, int64_t row_len = 0) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << ", expected " << expected.size();
  }
  return AllWithin(expected, actual.data(), tol, row_len);
}

// Bitwise equality of two dense [rows, cols] arrays of T; names the first
// differing (row, column).
template <typename T>
::testing::AssertionResult BitwiseEqual(const std::vector<T>& want, const std::vector<T>& got, int64_t cols) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << want.size();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "first difference at row " << i / cols << ", col " << i % cols
                                           << ": " << +got[i] << " vs " << +want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// Rows [begin, begin + count) of a dense [*, cols] array.
template <typename T>
std::vector<T> SliceRows(const std::vector<T>& a, int64_t cols, int64_t begin, int64_t count) {
  return std::vector<T>(a.begin() + begin * cols, a.begin() + (begin + count) * cols);
}

}  // namespace g4::testing
