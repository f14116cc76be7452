// AddNorm preparing the next product's input (norm.cu, ops.h
// AddNormArgs::next_product) on the SIMT emulator, without a GPU: the
// quantized rows it leaves in the MatMul's scratch are, bit for bit, what
// QuantizeGroup (QuantizeRows' code) gives on the row it produced (next_out,
// or x), for each of its kernels (a warp per narrow row, the register
// kernels, the loop kernel), and its float outputs are those of AddNorm
// without the hint. tests/backend checks the whole (AddNorm, then the
// product) against no hint on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/launch.h"
#include "host_scratch.h"
#include "quantize_sim.h"

namespace g4::cuda {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

bool SameBits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

struct Case {
  int64_t rows, d;
  int bits, group;
  bool of_x;
};

void ExpectPreparedInputIsQuantizeGroups(const Case& c, uint32_t seed) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + ", d " + std::to_string(c.d) + ", bits " + std::to_string(c.bits) +
               ", group " + std::to_string(c.group) + (c.of_x ? ", of x" : ", of next_out"));
  std::mt19937 rng(seed);
  const int64_t ld = c.d + 3, n = c.rows * ld;
  const std::vector<float> x0 = Random(n, rng, 2.0f), o = Random(n, rng, 4.0f);
  const std::vector<float> post = Random(c.d, rng, 1.0f), next_w = Random(c.d, rng, 1.0f);
  WeightMatrix w;
  w.format = WeightMatrix::Format::kAffine;
  w.rows = 16;
  w.cols = c.d;
  w.bits = c.bits;
  w.group_size = c.group;

  struct Out {
    std::vector<float> x, o, next;
    bool quantized = false;
  };
  sim::HostScratch scratch;
  const auto run = [&](bool hint) {
    Out r{x0, o, std::vector<float>(n, 0.0f)};
    AddNormArgs a;
    a.x = TensorView{r.x.data(), DType::kF32, c.rows, c.d, ld};
    a.o = TensorView{r.o.data(), DType::kF32, c.rows, c.d, ld};
    a.post_weight = post.data();
    a.scale = 0.75f;
    a.next_out = TensorView{r.next.data(), DType::kF32, c.rows, c.d, ld};
    a.next_weight = next_w.data();
    if (hint) {
      a.next_product = &w;
      a.product_of_x = c.of_x;
    }
    r.quantized = AddNorm(a, scratch, nullptr);
    return r;
  };
  const Out plain = run(false);
  ASSERT_FALSE(plain.quantized);
  const Out hinted = run(true);
  ASSERT_TRUE(hinted.quantized);
  EXPECT_TRUE(SameBits(plain.x.data(), hinted.x.data(), n * sizeof(float))) << "x";
  EXPECT_TRUE(SameBits(plain.next.data(), hinted.next.data(), n * sizeof(float))) << "next_out";

  const size_t bytes = QRowsBytes(c.rows, c.d, c.group);
  const QRows got = QRowsIn(scratch.Get(Scratch::kQuant, bytes), c.rows, c.d, c.group);
  std::vector<char> want_buf(bytes, 0);
  const QRows want = QRowsIn(want_buf.data(), c.rows, c.d, c.group);
  const std::vector<float>& in = c.of_x ? plain.x : plain.next;
  for (int64_t m = 0; m < c.rows; ++m) sim::QuantizeRowInto(want, m, in.data() + m * ld, nullptr, c.d, c.group, c.bits);
  const int64_t groups = c.d / c.group;
  EXPECT_TRUE(SameBits(got.q, want.q, c.rows * c.d)) << "codes";
  EXPECT_TRUE(SameBits(got.d, want.d, c.rows * groups * sizeof(float))) << "d";
  EXPECT_TRUE(SameBits(got.xs, want.xs, c.rows * groups * sizeof(float))) << "xs";
}

TEST(AddNormQuantSim, PreparedInputIsQuantizeGroups) {
  uint32_t seed = 10;
  // 512: a warp per row; 2048, 2560, 3840, 5376: the register kernels (8,
  // 10 of 12, 15 of 16, 21 of 24 columns a thread); 6400: the loop kernel.
  for (int64_t d : {512, 2048, 2560, 3840, 5376, 6400})
    for (bool of_x : {false, true}) ExpectPreparedInputIsQuantizeGroups({3, d, 4, 64, of_x}, ++seed);
  for (int bits : {2, 8})
    for (int group : {32, 128}) {
      ExpectPreparedInputIsQuantizeGroups({1, 2560, bits, group, false}, ++seed);
      ExpectPreparedInputIsQuantizeGroups({2, 512, bits, group, true}, ++seed);
    }
}

}  // namespace
}  // namespace g4::cuda
