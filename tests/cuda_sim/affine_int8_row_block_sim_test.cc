// The block-shared one-row MatMul (affine_int8_row_block.cu) on the SIMT
// emulator (include/simt.h), without a GPU: on an input row QuantizeGroup
// quantized (QuantizeRows' kernel), its outputs are the integer scheme of
// affine_int8.cuh (affine_sim.h) bit for bit. tests/backend runs the
// kernel on a GPU against the CPU backend.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/affine_int8.cuh"
#include "backend/cuda/affine_int8_core.cuh"
#include "affine_sim.h"
#include "quantize_sim.h"

namespace g4::cuda {
namespace {

// Products of `rows` rows (4-bit, bf16 scales) times one float row of
// `cols` columns (gated: gelu_tanh(x) * u), quantized by QuantizeGroup:
// the kernel gives the scheme's bits.
void ExpectKernelGivesTheScheme(int group, int64_t cols, std::vector<int64_t> rows, bool gated, uint32_t seed) {
  SCOPED_TRACE("group " + std::to_string(group) + ", cols " + std::to_string(cols) + (gated ? ", gated" : ""));
  std::mt19937 rng(seed);
  std::vector<float> x(cols), u(cols);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t c = 0; c < cols; ++c) x[c] = n(rng), u[c] = n(rng);
  const float* up = gated ? u.data() : nullptr;
  sim::QuantizedRows in(1, cols, group, rng);
  sim::QuantizeRowInto(in.View(), 0, x.data(), up, cols, group, 4);

  std::vector<sim::Product> ps;
  for (int64_t r : rows) ps.emplace_back(r, cols, group, rng);
  std::vector<AffineOut> outs;
  for (sim::Product& p : ps) outs.push_back(p.Out());
  ASSERT_TRUE(AffineInt8RowBlockMatMulTakes(outs));
  AffineInt8RowBlockMatMul(outs, 4, in.View(), nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    sim::ExpectOutputsGiveTheScheme(ps[i], in, 1, [](int64_t) { return int64_t{0}; },
                                    ("product " + std::to_string(i)).c_str());
}

TEST(RowBlockSim, KernelGivesTheScheme) {
  // Products ending inside a block's 8 rows; rows of more than 32 groups
  // (two rounds of a warp's lanes); gated inputs.
  ExpectKernelGivesTheScheme(64, 256, {20}, true, 1);
  ExpectKernelGivesTheScheme(32, 256, {8, 13}, false, 2);
  ExpectKernelGivesTheScheme(32, 1280, {11, 5, 16}, false, 3);
  ExpectKernelGivesTheScheme(64, 2560, {9}, true, 4);
  ExpectKernelGivesTheScheme(128, 1536, {17, 3}, false, 5);
  // Enough rows for blocks of 16 (at least one a resident slot: 4 x 132),
  // the last block short.
  ExpectKernelGivesTheScheme(64, 128, {8450}, true, 6);
}

}  // namespace
}  // namespace g4::cuda
