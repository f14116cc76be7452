// The affine MatMul on the int8 tensor cores (affine_int8_mma.cu: every
// batch from 9 rows, and prefill) on the SIMT emulator (include/simt.h),
// without a GPU: random 4-bit codes, bf16 scales and biases and random
// quantized input rows against the integer scheme of affine_int8.cuh
// computed on the host, bit for bit, in each of the kernel's three tile
// shapes, with tails in every direction (input rows, weight rows, k-tiles)
// and several products in one launch. Integer mma sums are exact on the
// hardware and in the emulator alike, so these are the hardware's bits;
// tests/backend runs the kernel on a GPU against the CPU backend.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "affine_sim.h"
#include "backend/cuda/affine_int8.cuh"

namespace g4::cuda {
namespace {

using sim::Product;
using sim::QuantizedRows;

struct Case {
  int bm;                      // the kernel's tile rows: 8, 32 or 64
  int64_t m;                   // input rows
  int group, groups;           // columns: group * groups
  std::vector<int64_t> rows;   // weight rows of each product
};

void ExpectKernelGivesTheScheme(const Case& c, uint32_t seed) {
  std::ostringstream name;
  name << "tile rows " << c.bm << ", " << c.m << " input rows, group " << c.group << " x " << c.groups;
  SCOPED_TRACE(name.str());
  std::mt19937 rng(seed);
  const int64_t cols = static_cast<int64_t>(c.group) * c.groups;
  std::vector<Product> ps;
  for (int64_t r : c.rows) ps.emplace_back(r, cols, c.group, rng, c.m);
  QuantizedRows in(c.m, cols, c.group, rng);
  std::vector<AffineOut> outs;
  for (Product& p : ps) outs.push_back(p.Out());
  AffineInt8MmaMatMul(outs, 4, in.View(), {.M = c.m}, c.bm, (c.m + c.bm - 1) / c.bm, nullptr);
  for (size_t i = 0; i < ps.size(); ++i)
    sim::ExpectOutputsGiveTheScheme(ps[i], in, c.m, [](int64_t m) { return m; },
                                    ("product " + std::to_string(i)).c_str());
}

TEST(AffineInt8MmaSim, GivesTheIntegerSchemesBits) {
  // Groups of 64 (Gemma's): k-tiles of 4 groups, the last one short.
  ExpectKernelGivesTheScheme({8, 19, 64, 9, {37, 16}}, 1);      // 3 tiles of 8 rows, the last 3; two products
  ExpectKernelGivesTheScheme({32, 32, 64, 13, {64, 70}}, 2);    // batch 32: whole tiles, a row tail
  ExpectKernelGivesTheScheme({32, 11, 64, 6, {40}}, 3);         // a short batch
  ExpectKernelGivesTheScheme({64, 70, 64, 5, {130, 8, 3}}, 4);  // prefill: two tiles, three products
  // Groups of 32 (k-tiles of 4 chunks) and of 128 (two k-tiles a group... one).
  ExpectKernelGivesTheScheme({32, 20, 32, 9, {48}}, 5);
  ExpectKernelGivesTheScheme({8, 9, 128, 5, {33}}, 6);
}

}  // namespace
}  // namespace g4::cuda
