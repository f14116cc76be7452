// Backend memory and copies: alignment, lazily committed large buffers,
// round trips through every copy direction, UploadConstant, and the
// descriptive queries.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

class BackendMemoryTest : public testing::BackendTest {};

TEST_P(BackendMemoryTest, AllocationsAreAlignedAndDistinct) {
  std::vector<DeviceBuffer> buffers;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{4097}, size_t{1} << 20,
                       (size_t{3} << 20) + 5}) {
    StatusOr<DeviceBuffer> b = backend().Allocate(bytes, "test");
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(b->bytes(), bytes);
    EXPECT_NE(b->data(), nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 256, 0u) << bytes;
    buffers.push_back(std::move(b).value());
  }
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j) EXPECT_NE(buffers[i].data(), buffers[j].data());
}

TEST_P(BackendMemoryTest, ImpossibleSizesAreResourceExhausted) {
  for (size_t bytes : {size_t{1} << 60, SIZE_MAX / 2, SIZE_MAX}) {
    StatusOr<DeviceBuffer> b = backend().Allocate(bytes, "impossible");
    ASSERT_FALSE(b.ok()) << bytes;
    EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(b.status().message().find("impossible"), std::string::npos) << b.status().message();
  }
}

TEST_P(BackendMemoryTest, CopiesRoundTrip) {
  for (size_t bytes : {size_t{1}, size_t{1000}, (size_t{2} << 20) + 3}) {
    std::vector<uint8_t> host(bytes);
    std::iota(host.begin(), host.end(), static_cast<uint8_t>(bytes));
    StatusOr<DeviceBuffer> a = backend().Allocate(bytes, "a");
    StatusOr<DeviceBuffer> b = backend().Allocate(bytes, "b");
    ASSERT_TRUE(a.ok() && b.ok());
    backend().CopyToDevice(a->data(), host.data(), bytes);
    backend().CopyOnDevice(b->data(), a->data(), bytes);
    std::vector<uint8_t> back(bytes, 0);
    backend().CopyToHost(back.data(), b->data(), bytes);
    backend().Sync();
    EXPECT_EQ(back, host) << bytes;
  }
}

TEST_P(BackendMemoryTest, LargeReservationsCostOnlyWhatIsWritten) {
  // 64 GiB reserved, two pages written: must succeed and read back.
  const size_t huge = size_t{64} << 30;
  StatusOr<DeviceBuffer> b = backend().Allocate(huge, "huge");
  if (!b.ok()) GTEST_SKIP() << "this backend cannot reserve 64 GiB: " << b.status().message();
  const uint32_t v = 0xC0FFEEu;
  backend().CopyToDevice(b->data(), &v, sizeof(v));
  backend().CopyToDevice(b->as<char>() + huge - sizeof(v), &v, sizeof(v));
  uint32_t first = 0, last = 0;
  backend().CopyToHost(&first, b->data(), sizeof(v));
  backend().CopyToHost(&last, b->as<char>() + huge - sizeof(v), sizeof(v));
  backend().Sync();
  EXPECT_EQ(first, v);
  EXPECT_EQ(last, v);
}

TEST_P(BackendMemoryTest, MoveTransfersOwnership) {
  StatusOr<DeviceBuffer> b = backend().Allocate(1024, "move");
  ASSERT_TRUE(b.ok());
  DeviceBuffer a = std::move(b).value();
  void* p = a.data();
  DeviceBuffer c = std::move(a);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.bytes(), 0u);
  c.Reset();
  EXPECT_EQ(c.data(), nullptr);
}

TEST_P(BackendMemoryTest, UploadConstantSynchronizes) {
  std::vector<float> host = testing::RandomFloats(1000, 4);
  StatusOr<DeviceBuffer> b = UploadConstant(backend(), host.data(), host.size() * sizeof(float), "constant");
  ASSERT_TRUE(b.ok());
  const std::vector<float> want = host;
  std::fill(host.begin(), host.end(), 0.0f);  // the source may be reused at once
  std::vector<float> back(1000);
  backend().CopyToHost(back.data(), b->data(), back.size() * sizeof(float));
  backend().Sync();
  EXPECT_EQ(back, want);
}

TEST_P(BackendMemoryTest, DescribesItself) {
  EXPECT_EQ(backend().Describe().rfind(backend().name() + ":", 0), 0u) << backend().Describe();
  EXPECT_GT(backend().FreeMemory(), size_t{1} << 20);
}

TEST(CpuBackendTest, HostSpaceAndThreads) {
  std::unique_ptr<Backend> cpu = testing::MakeBackend("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->space(), MemorySpace::kHost);
  EXPECT_NE(cpu->Describe().find("threads"), std::string::npos) << cpu->Describe();
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendMemoryTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
