// Embed against the exact stored values of the selected rows, into
// contiguous and strided outputs, and rows alone vs in a batch.
#include <gtest/gtest.h>

#include <vector>

#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;
using testing::kEps;

class EmbedTest : public testing::BackendTest {};

void CheckEmbed(Backend& backend, const testing::TestWeights& tw, const std::vector<int32_t>& ids, float scale,
                int64_t pad) {
  const int64_t d = tw.w.cols, n = static_cast<int64_t>(ids.size());
  const testing::DeviceWeights dw = testing::UploadWeights(backend, tw);
  const DeviceBuffer dids = testing::UploadArray(backend, ids);
  DeviceTensor out = testing::AllocTensor(backend, DType::kF32, n, d, d + pad);
  backend.ops().Embed(dw.w, dids.as<int32_t>(), scale, out.view);
  std::vector<double> ref(n * d), tol(n * d);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < d; ++c) {
      ref[i * d + c] = tw.value[ids[i] * d + c] * scale;
      // s*q + b rounded (or fused) once, then scaled once.
      tol[i * d + c] = 2 * kEps * tw.magnitude[ids[i] * d + c] * std::fabs(scale) + 1e-30;
    }
  }
  EXPECT_TRUE(testing::AllWithin(ref, testing::DownloadF32(backend, out.view), tol, d)) << tw.w.Describe();
  EXPECT_TRUE(testing::GuardsIntact(backend, out));
}

TEST_P(EmbedTest, DenseAndAffineRows) {
  const std::vector<int32_t> ids = {5, 0, 5, 12, 3};
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    CheckEmbed(backend(), testing::MakeDense(13, 77, t, 3), ids, 39.25f, 0);
    CheckEmbed(backend(), testing::MakeDense(13, 77, t, 4), ids, 1.0f, 19);
  }
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (DType st : {DType::kBF16, DType::kF16, DType::kF32})
        CheckEmbed(backend(), testing::MakeAffine(13, 384, bits, group, st, bits * 100 + group), ids, -1.5f,
                   group == 64 ? 7 : 0);
}

TEST_P(EmbedTest, ManyIdsInParallel) {
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % 41);
  CheckEmbed(backend(), testing::MakeAffine(41, 512, 4, 64, DType::kBF16, 9), ids, 50.5f, 0);
}

TEST_P(EmbedTest, RowsAloneEqualRowsInABatch) {
  const testing::TestWeights tw = testing::MakeAffine(97, 1536, 4, 64, DType::kBF16, 11);
  const testing::DeviceWeights dw = testing::UploadWeights(backend(), tw);
  std::vector<int32_t> ids(200);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 31 + 7) % 97);
  const DeviceBuffer dids = testing::UploadArray(backend(), ids);
  DeviceTensor batch = testing::AllocTensor(backend(), DType::kF32, 200, 1536);
  ops().Embed(dw.w, dids.as<int32_t>(), 39.0f, batch.view);
  const std::vector<float> want = testing::DownloadF32(backend(), batch.view);
  for (int64_t r : {0, 99, 199}) {
    const DeviceBuffer one_id = testing::UploadArray(backend(), std::vector<int32_t>{ids[r]});
    DeviceTensor one = testing::AllocTensor(backend(), DType::kF32, 1, 1536);
    ops().Embed(dw.w, one_id.as<int32_t>(), 39.0f, one.view);
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(want, 1536, r, 1), testing::DownloadF32(backend(), one.view),
                                      1536))
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EmbedTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4
