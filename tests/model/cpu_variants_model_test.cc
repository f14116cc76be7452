// Whole forward passes on every CPU kernel variant this machine runs
// (backend/cpu/isa.h), forced one after another on the same fixtures.
// Full-precision weights: the logits agree to within float32 rounding as it
// grows through the layers (the golden test's 1e-3 against transformers) and
// every row's top token is the same. Quantized weights: the affine MatMuls
// are bit-identical across variants, but the other ops' float32 differences
// move an int8 input rounding now and then (backend/cpu/affine_int8.h), which
// these amplifying fixtures grow: the logits stay within a small relative
// RMS difference (0.05, a fifth of the golden test's reduced-precision
// envelope) and the top token agrees wherever it is decisive (top-2 gap over
// 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model_runner.h"
#include "test_util.h"

namespace g4 {
namespace {

std::vector<float> PromptLogits(const std::string& model, CpuKernels kernels,
                                const std::vector<int32_t>& ids) {
  testing::ModelRunner runner(model, "plain", 4, 64, 8, true, kernels);
  EXPECT_TRUE(runner.ok());
  if (!runner.ok()) return {};
  KvSeq seq = runner.pool().NewSequence();
  auto logits = runner.Prefill(seq, ids, 16);
  EXPECT_TRUE(logits.ok()) << logits.status().ToString();
  return logits.ok() ? *logits : std::vector<float>();
}

class CpuVariantLogitsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuVariantLogitsTest, LogitsAgreeAcrossKernelVariants) {
  auto g = SafetensorsFile::Open(testing::TestDataPath("models/" + GetParam()) + "/golden.safetensors");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const TensorInfo* t = (*g)->Find("long.ids");
  ASSERT_NE(t, nullptr);
  std::vector<int32_t> ids(t->numel());
  std::memcpy(ids.data(), t->data, t->nbytes);
  std::vector<CpuKernels> variants;
  for (CpuKernels k : {CpuKernels::kAvx512, CpuKernels::kAvx2, CpuKernels::kBaseline}) {
    if (CpuKernelsSupported(k)) variants.push_back(k);
  }
  const std::vector<float> want = PromptLogits(GetParam(), variants[0], ids);
  ASSERT_FALSE(want.empty());
  const int64_t V = static_cast<int64_t>(want.size() / ids.size());
  for (size_t v = 1; v < variants.size(); ++v) {
    const std::vector<float> got = PromptLogits(GetParam(), variants[v], ids);
    ASSERT_EQ(got.size(), want.size());
    const bool quantized = GetParam().find("-q4") != std::string::npos;
    auto m = testing::Compare(want.data(), got.data(), want.size(), 1e-3);
    const double rel = testing::RelativeRms(want.data(), got.data(), want.size());
    if (quantized) {
      EXPECT_LT(rel, 0.05) << CpuKernelsName(variants[v]);
    } else {
      EXPECT_TRUE(m.ok) << CpuKernelsName(variants[v]) << " vs " << CpuKernelsName(variants[0]) << ": "
                        << m.ToString();
    }
    int rows = 0, same_top = 0;
    for (size_t row = 0; row < ids.size(); ++row) {
      const float* a = &want[row * V];
      const float* b = &got[row * V];
      std::vector<float> sorted(a, a + V);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (quantized && sorted[0] - sorted[1] < 1.0f) continue;
      ++rows;
      same_top += (std::max_element(a, a + V) - a) == (std::max_element(b, b + V) - b);
    }
    EXPECT_EQ(same_top, rows) << CpuKernelsName(variants[v]);
    std::printf("[ %s %s vs %s ] max |dlogit| = %.3g, relative RMS %.3g\n", GetParam().c_str(),
                CpuKernelsName(variants[v]), CpuKernelsName(variants[0]), m.max_abs_diff, rel);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CpuVariantLogitsTest,
                         ::testing::Values("tiny-dense", "tiny-e", "tiny-e-q4"),
                         [](const auto& info) { return testing::FixtureTestName(info.param); });

}  // namespace
}  // namespace g4
