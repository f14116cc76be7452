// Embed against the exact stored values of the selected rows.
#include <gtest/gtest.h>

#include <vector>

#include "backend/ops.h"
#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::kEps;

void CheckEmbed(Ops& ops, const testing::TestWeights& tw, const std::vector<int32_t>& ids, float scale) {
  const int64_t d = tw.w.cols;
  std::vector<float> out(ids.size() * d + 1, NAN);
  out.back() = 777.0f;
  ops.Embed(tw.w, ids.data(), ids.size(), scale, out.data());
  std::vector<double> ref(ids.size() * d), tol(ids.size() * d);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t c = 0; c < d; ++c) {
      ref[i * d + c] = tw.value[ids[i] * d + c] * scale;
      // s*q + b rounded (or fused) once, then scaled once.
      tol[i * d + c] = 2 * kEps * tw.magnitude[ids[i] * d + c] * std::fabs(scale) + 1e-30;
    }
  }
  EXPECT_TRUE(testing::AllWithin(ref, out.data(), tol, d)) << tw.w.Describe();
  EXPECT_EQ(out.back(), 777.0f);
}

TEST(EmbedTest, DenseAndAffineRows) {
  auto ops = MakeCpuOps();
  const std::vector<int32_t> ids = {5, 0, 5, 12, 3};
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    CheckEmbed(*ops, testing::MakeDense(13, 77, t, 3), ids, 39.25f);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (DType st : {DType::kBF16, DType::kF16, DType::kF32})
        CheckEmbed(*ops, testing::MakeAffine(13, 384, bits, group, st, bits * 100 + group), ids, -1.5f);
}

TEST(EmbedTest, ManyIdsInParallel) {
  auto ops = MakeCpuOps();
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % 41);
  CheckEmbed(*ops, testing::MakeAffine(41, 512, 4, 64, DType::kBF16, 9), ids, 50.5f);
}

}  // namespace
}  // namespace g4
