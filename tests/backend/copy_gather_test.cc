// Copy and GatherRows: exact, for every dtype the graph moves (F32
// activations, I32 ids, U8 bytes), across strided layouts, never writing
// outside the destination view.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;

class CopyGatherTest : public testing::BackendTest {};

template <typename T>
std::vector<T> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) {
    const uint32_t bits = rng();
    std::memcpy(&x, &bits, sizeof(T));  // any bit pattern, NaNs included: copies are bitwise
  }
  return v;
}

template <typename T>
void CheckCopy(Backend& backend, DType dtype, int64_t rows, int64_t cols, int64_t src_pad, int64_t dst_pad,
               uint32_t seed) {
  const std::vector<T> host = RandomValues<T>(rows * cols, seed);
  DeviceTensor src = testing::Upload(backend, dtype, host, rows, cols, cols + src_pad);
  DeviceTensor dst = testing::AllocTensor(backend, dtype, rows, cols, cols + dst_pad);
  backend.ops().Copy(src.view, dst.view);
  EXPECT_TRUE(testing::BitwiseEqual(host, testing::Download<T>(backend, dst.view), cols))
      << rows << "x" << cols << " pads " << src_pad << "," << dst_pad;
  EXPECT_TRUE(testing::GuardsIntact(backend, dst));
}

TEST_P(CopyGatherTest, CopyAnyLayoutAndDtype) {
  uint32_t seed = 0;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{0, 3}, {1, 1}, {5, 17}, {64, 300}}) {
    for (auto [sp, dp] : {std::pair<int64_t, int64_t>{0, 0}, {3, 0}, {0, 5}, {7, 2}}) {
      CheckCopy<float>(backend(), DType::kF32, rows, cols, sp, dp, ++seed);
      CheckCopy<int32_t>(backend(), DType::kI32, rows, cols, sp, dp, ++seed);
      CheckCopy<uint8_t>(backend(), DType::kU8, rows, cols, sp, dp, ++seed);
    }
  }
}

template <typename T>
void CheckGather(Backend& backend, DType dtype, int64_t src_rows, int64_t cols, const std::vector<int32_t>& idx,
                 int64_t src_pad, int64_t dst_pad, uint32_t seed) {
  const std::vector<T> host = RandomValues<T>(src_rows * cols, seed);
  DeviceTensor src = testing::Upload(backend, dtype, host, src_rows, cols, cols + src_pad);
  const DeviceBuffer didx = testing::UploadArray(backend, idx);
  const int64_t n = static_cast<int64_t>(idx.size());
  DeviceTensor dst = testing::AllocTensor(backend, dtype, n, cols, cols + dst_pad);
  backend.ops().GatherRows(src.view, didx.as<int32_t>(), dst.view);
  std::vector<T> want;
  for (int32_t r : idx) want.insert(want.end(), host.begin() + r * cols, host.begin() + (r + 1) * cols);
  EXPECT_TRUE(testing::BitwiseEqual(want, testing::Download<T>(backend, dst.view), cols))
      << n << " rows of " << src_rows << "x" << cols;
  EXPECT_TRUE(testing::GuardsIntact(backend, dst));
}

TEST_P(CopyGatherTest, GatherRowsRepeatsAndReorders) {
  std::mt19937 rng(3);
  uint32_t seed = 100;
  for (int64_t cols : {1, 16, 2817}) {
    for (int64_t src_rows : {1, 9, 300}) {
      std::vector<int32_t> idx(1 + rng() % 40);
      for (int32_t& i : idx) i = static_cast<int32_t>(rng() % src_rows);
      CheckGather<float>(backend(), DType::kF32, src_rows, cols, idx, 0, 0, ++seed);
      CheckGather<float>(backend(), DType::kF32, src_rows, cols, idx, 5, 11, ++seed);
      CheckGather<int32_t>(backend(), DType::kI32, src_rows, cols, idx, 1, 0, ++seed);
    }
  }
  CheckGather<float>(backend(), DType::kF32, 4, 8, {}, 0, 0, 7);  // no rows: nothing written
}

INSTANTIATE_TEST_SUITE_P(Backends, CopyGatherTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
