// --gpu-memory (EngineOptions::memory_cap_bytes): the KV pool gets the cap
// less what the backend holds less a sixteenth for step buffers, the engine
// stays under the cap, and a cap or pool that cannot fit is an error naming
// the flag. Backend::HeldBytes, which the cap is measured with, follows
// every Allocate and free.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "model/activations.h"
#include "test_backend.h"
#include "test_util.h"

namespace g4 {
namespace {

class MemoryCapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = testing::MakeTestBackend();
    auto m = Gemma4Model::Load(testing::TestDataPath("models/tiny-e"), *backend_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
  }

  EngineOptions Options(size_t cap, size_t kv = 0) const {
    EngineOptions o;
    o.kv = "plain:bf16";
    o.max_seqs = 2;
    o.max_step_tokens = 16;
    o.memory_cap_bytes = cap;
    o.kv_budget_bytes = kv;
    return o;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Gemma4Model> model_;
};

TEST_F(MemoryCapTest, HeldBytesFollowAllocations) {
  const size_t before = backend_->HeldBytes();
  {
    auto a = backend_->Allocate(size_t{3} << 20, "test a");
    ASSERT_TRUE(a.ok());
    auto b = backend_->Allocate(12345, "test b");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(backend_->HeldBytes(), before + (size_t{3} << 20) + 12345);
    DeviceBuffer moved = std::move(a).value();
    EXPECT_EQ(backend_->HeldBytes(), before + (size_t{3} << 20) + 12345);
    moved.Reset();
    EXPECT_EQ(backend_->HeldBytes(), before + 12345);
  }
  EXPECT_EQ(backend_->HeldBytes(), before);
}

TEST_F(MemoryCapTest, PoolTakesWhatTheCapLeaves) {
  const size_t held = backend_->HeldBytes();
  const size_t cap = held + (size_t{256} << 20);
  auto e = Engine::Create(*model_, Options(cap));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const size_t room = cap - held - cap / 16;
  const size_t pool = (*e)->pool().capacity_bytes();
  EXPECT_LE(pool, room);
  EXPECT_GE(pool, room / 2) << "the pool should take most of what the cap leaves";
  EXPECT_LE(backend_->HeldBytes(), cap);
}

TEST_F(MemoryCapTest, CapBelowWhatIsHeldIsAnError) {
  const size_t held = backend_->HeldBytes();
  auto e = Engine::Create(*model_, Options(held + 1024));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(e.status().message().find("--gpu-memory"), std::string::npos) << e.status().message();
}

TEST_F(MemoryCapTest, ExplicitPoolMustFitUnderTheCap) {
  const size_t held = backend_->HeldBytes();
  const size_t cap = held + (size_t{128} << 20);
  auto big = Engine::Create(*model_, Options(cap, size_t{200} << 20));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("does not fit"), std::string::npos) << big.status().message();
  auto small = Engine::Create(*model_, Options(cap, size_t{16} << 20));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_LE((*small)->pool().capacity_bytes(), size_t{16} << 20);
}

TEST_F(MemoryCapTest, DefaultPoolOnADeviceIsTheFreeMemoryLessAMargin) {
  // Without --gpu-memory or --kv-memory a device backend's pool takes what
  // is free less the step buffers, 1 GiB and a 32nd (engine.cc); the host
  // keeps half (pages committed lazily: not worth allocating here).
  if (backend_->space() != MemorySpace::kDevice) GTEST_SKIP() << "host backend: the pool is half the free memory";
  const size_t free = backend_->FreeMemory();
  const EngineOptions o = Options(0);
  SchedulerOptions so;
  so.max_step_tokens = o.max_step_tokens;
  so.max_seqs = o.max_seqs;
  const size_t steps = Activations::Bytes(model_->config(), Scheduler::ActivationLimitsFor(so), o.block_size);
  auto e = Engine::Create(*model_, o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const size_t pool = (*e)->pool().capacity_bytes();
  EXPECT_LE(pool + steps + (size_t{1} << 30), free);
  EXPECT_GE(pool, free - free / 16 - steps - (size_t{2} << 30)) << "the pool should take nearly all that is free";
  EXPECT_GE(backend_->FreeMemory(), size_t{1} << 30) << "the scheduler's buffers and the reserve stay free";
}

}  // namespace
}  // namespace g4
