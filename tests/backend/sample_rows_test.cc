// SampleRows against the reference Sampler (backend/sampler.h), token for
// token, on many random rows with random parameter sets (every filter,
// penalty, bias, XTC with exempt ids, greedy), including the logits left
// after steps 1-4 and the top_logprobs outputs; and each row sampled alone
// equals the same row sampled in a batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "backend/sampler.h"
#include "backend_test_util.h"

namespace g4 {
namespace {

using testing::DeviceTensor;

class SampleRowsTest : public testing::BackendTest {};

// A step's worth of sampling inputs on the host.
struct Batch {
  int64_t rows = 0;
  int vocab = 0;
  std::vector<float> logits;  // [rows, vocab]
  std::vector<SampleRowParams> params;
  std::vector<int32_t> bias_ids, exempt_ids, history;
  std::vector<float> bias_values;
};

Batch RandomBatch(std::mt19937& rng, int64_t rows, int vocab) {
  Batch b;
  b.rows = rows;
  b.vocab = vocab;
  std::normal_distribution<float> logit(0.0f, 2.5f);
  b.logits.resize(rows * vocab);
  for (float& l : b.logits) l = logit(rng);
  auto coin = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  auto uniform = [&](float lo, float hi) { return lo + (hi - lo) * static_cast<float>(rng() % 10000) / 10000.0f; };
  for (int64_t r = 0; r < rows; ++r) {
    SampleRowParams p;
    p.temperature = coin(15) ? 0.0f : uniform(0.2f, 2.0f);
    p.top_k = coin(50) ? 0 : 1 + static_cast<int32_t>(rng() % 60);
    p.top_p = coin(50) ? 1.0f : uniform(0.3f, 0.99f);
    p.min_p = coin(60) ? 0.0f : uniform(0.001f, 0.2f);
    p.xtc_probability = coin(70) ? 0.0f : (coin(50) ? 1.0f : 0.5f);
    p.xtc_threshold = uniform(0.02f, 0.3f);
    p.repetition_penalty = coin(50) ? 1.0f : uniform(1.05f, 1.6f);
    p.presence_penalty = coin(60) ? 0.0f : uniform(-0.5f, 1.0f);
    p.frequency_penalty = coin(60) ? 0.0f : uniform(0.0f, 0.6f);
    p.repetition_context = static_cast<int32_t>(rng() % 3) * 10;
    p.presence_context = static_cast<int32_t>(rng() % 3) * 7;
    p.frequency_context = static_cast<int32_t>(rng() % 3) * 5;
    // Distinct bias ids (the engine builds them from a map), some bans.
    p.bias_begin = static_cast<int32_t>(b.bias_ids.size());
    std::set<int32_t> biased;
    const int n_bias = coin(50) ? 0 : 1 + static_cast<int>(rng() % 4);
    while (static_cast<int>(biased.size()) < n_bias) biased.insert(static_cast<int32_t>(rng() % vocab));
    for (int32_t id : biased) {
      b.bias_ids.push_back(id);
      b.bias_values.push_back(coin(20) ? -INFINITY : uniform(-5.0f, 5.0f));
    }
    p.bias_count = n_bias;
    p.exempt_begin = static_cast<int32_t>(b.exempt_ids.size());
    p.exempt_count = coin(50) ? 0 : 1 + static_cast<int32_t>(rng() % 3);
    for (int i = 0; i < p.exempt_count; ++i) b.exempt_ids.push_back(static_cast<int32_t>(rng() % vocab));
    p.history_begin = static_cast<int32_t>(b.history.size());
    p.history_count = static_cast<int32_t>(rng() % 60);
    // Histories concentrated on few ids, so penalties hit repeated tokens.
    for (int i = 0; i < p.history_count; ++i) b.history.push_back(static_cast<int32_t>(rng() % (vocab / 8 + 1)));
    p.seed = (static_cast<uint64_t>(rng()) << 32) | rng();
    p.step = rng() % 5000;
    b.params.push_back(p);
  }
  return b;
}

// The reference chain for row r, as the Sampler API states it.
int ReferenceRow(const Batch& b, int64_t r, int top_logprobs, std::vector<float>* logits, LogProbs* lp) {
  const SampleRowParams& rp = b.params[r];
  SamplingParams p;
  p.temperature = rp.temperature;
  p.top_k = rp.top_k;
  p.top_p = rp.top_p;
  p.min_p = rp.min_p;
  p.xtc_probability = rp.xtc_probability;
  p.xtc_threshold = rp.xtc_threshold;
  p.repetition_penalty = rp.repetition_penalty;
  p.repetition_context_size = rp.repetition_context;
  p.presence_penalty = rp.presence_penalty;
  p.presence_context_size = rp.presence_context;
  p.frequency_penalty = rp.frequency_penalty;
  p.frequency_context_size = rp.frequency_context;
  for (int i = 0; i < rp.bias_count; ++i) p.logit_bias[b.bias_ids[rp.bias_begin + i]] = b.bias_values[rp.bias_begin + i];
  for (int i = 0; i < rp.exempt_count; ++i) p.xtc_exempt_tokens.push_back(b.exempt_ids[rp.exempt_begin + i]);
  p.top_logprobs = std::max(top_logprobs, 0);
  Sampler sampler(p, b.vocab);
  logits->assign(b.logits.begin() + r * b.vocab, b.logits.begin() + (r + 1) * b.vocab);
  const std::vector<int> history(b.history.begin() + rp.history_begin,
                                 b.history.begin() + rp.history_begin + rp.history_count);
  return sampler.Sample(logits->data(), history, rp.seed, rp.step, top_logprobs >= 0 ? lp : nullptr);
}

struct Sampled {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // after steps 1-4
  std::vector<int32_t> lp_ids;
  std::vector<float> lp_values;
};

// Rows [begin, begin + count) of the batch through Ops::SampleRows.
Sampled RunSampleRows(Backend& backend, const Batch& b, int64_t begin, int64_t count, int top_logprobs, int64_t pad) {
  auto nonempty = [](auto v) {
    if (v.empty()) v.resize(1);
    return v;
  };
  DeviceTensor logits = testing::UploadF32(backend, testing::SliceRows(b.logits, b.vocab, begin, count), count,
                                           b.vocab, b.vocab + pad);
  const DeviceBuffer params = testing::UploadArray(
      backend, std::vector<SampleRowParams>(b.params.begin() + begin, b.params.begin() + begin + count));
  const DeviceBuffer bias_ids = testing::UploadArray(backend, nonempty(b.bias_ids));
  const DeviceBuffer bias_values = testing::UploadArray(backend, nonempty(b.bias_values));
  const DeviceBuffer exempt = testing::UploadArray(backend, nonempty(b.exempt_ids));
  const DeviceBuffer history = testing::UploadArray(backend, nonempty(b.history));
  DeviceTensor out = testing::AllocTensor(backend, DType::kI32, count, 1);
  const int lp_cols = 1 + std::max(top_logprobs, 0);
  DeviceTensor lp_ids = testing::AllocTensor(backend, DType::kI32, count, lp_cols);
  DeviceTensor lp_values = testing::AllocTensor(backend, DType::kF32, count, lp_cols);
  SampleArgs args;
  args.logits = logits.view;
  args.params = params.as<SampleRowParams>();
  args.bias_ids = bias_ids.as<int32_t>();
  args.bias_values = bias_values.as<float>();
  args.exempt_ids = exempt.as<int32_t>();
  args.history = history.as<int32_t>();
  args.out_ids = out.view;
  args.top_logprobs = top_logprobs;
  if (top_logprobs >= 0) {
    args.logprob_ids = lp_ids.view;
    args.logprob_values = lp_values.view;
  }
  backend.ops().SampleRows(args);
  EXPECT_TRUE(testing::GuardsIntact(backend, out));
  EXPECT_TRUE(testing::GuardsIntact(backend, logits));
  Sampled s;
  s.ids = testing::DownloadI32(backend, out.view);
  s.logits = testing::DownloadF32(backend, logits.view);
  if (top_logprobs >= 0) {
    EXPECT_TRUE(testing::GuardsIntact(backend, lp_ids));
    s.lp_ids = testing::DownloadI32(backend, lp_ids.view);
    s.lp_values = testing::DownloadF32(backend, lp_values.view);
  }
  return s;
}

void CheckAgainstReference(Backend& backend, const Batch& b, int top_logprobs, int64_t pad) {
  const Sampled got = RunSampleRows(backend, b, 0, b.rows, top_logprobs, pad);
  const int lp_cols = 1 + std::max(top_logprobs, 0);
  for (int64_t r = 0; r < b.rows; ++r) {
    std::vector<float> logits;
    LogProbs lp;
    const int want = ReferenceRow(b, r, top_logprobs, &logits, &lp);
    ASSERT_EQ(got.ids[r], want) << "row " << r << " of " << b.rows << ", vocab " << b.vocab;
    ASSERT_TRUE(testing::BitwiseEqual(logits, testing::SliceRows(got.logits, b.vocab, r, 1), b.vocab))
        << "logits after steps 1-4, row " << r;
    if (top_logprobs < 0) continue;
    EXPECT_EQ(got.lp_ids[r * lp_cols], want);
    EXPECT_NEAR(got.lp_values[r * lp_cols], lp.logprob, 1e-4 * (1 + std::fabs(lp.logprob))) << "row " << r;
    for (int i = 0; i < top_logprobs; ++i) {
      const int32_t id = got.lp_ids[r * lp_cols + 1 + i];
      const float v = got.lp_values[r * lp_cols + 1 + i];
      if (static_cast<size_t>(i) < lp.top.size()) {
        EXPECT_EQ(id, lp.top[i].id) << "row " << r << " alternative " << i;
        EXPECT_NEAR(v, lp.top[i].logprob, 1e-4 * (1 + std::fabs(lp.top[i].logprob))) << "row " << r;
      } else {
        EXPECT_EQ(id, -1) << "row " << r << " alternative " << i << " beyond the vocabulary";
        EXPECT_EQ(v, -INFINITY);
      }
    }
  }
}

TEST_P(SampleRowsTest, MatchesTheReferenceSamplerTokenForToken) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 12; ++trial) {
    const int vocab = trial % 3 == 0 ? 97 : 1000 + trial * 37;
    const Batch b = RandomBatch(rng, 8 + trial * 3, vocab);
    CheckAgainstReference(backend(), b, trial % 3 == 0 ? -1 : trial % 3 == 1 ? 0 : 5, trial % 2 ? 13 : 0);
  }
}

TEST_P(SampleRowsTest, FullVocabularyRows) {
  std::mt19937 rng(2);
  CheckAgainstReference(backend(), RandomBatch(rng, 5, 262144), 3, 0);
}

TEST_P(SampleRowsTest, MoreAlternativesThanTokens) {
  std::mt19937 rng(3);
  CheckAgainstReference(backend(), RandomBatch(rng, 4, 3), 6, 1);
}

TEST_P(SampleRowsTest, RowsAloneEqualRowsInABatch) {
  std::mt19937 rng(4);
  const Batch b = RandomBatch(rng, 30, 2000);
  const Sampled batch = RunSampleRows(backend(), b, 0, b.rows, 4, 0);
  for (int64_t r = 0; r < b.rows; r += 3) {
    const Sampled one = RunSampleRows(backend(), b, r, 1, 4, 7);
    EXPECT_EQ(one.ids[0], batch.ids[r]) << "row " << r;
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(batch.logits, b.vocab, r, 1), one.logits, b.vocab));
    EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(batch.lp_values, 5, r, 1), one.lp_values, 5));
  }
}

TEST_P(SampleRowsTest, GreedyRowsTakeTheArgmaxAndSeedsOnlyMoveSampledRows) {
  // Rows differing only in (seed, step): greedy rows agree, sampled rows
  // follow the draw of their own (seed, step) (checked: the reference).
  std::mt19937 rng(5);
  Batch b = RandomBatch(rng, 16, 500);
  for (int64_t r = 0; r < b.rows; ++r) {
    std::copy(b.logits.begin(), b.logits.begin() + 500, b.logits.begin() + r * 500);
    b.params[r] = SampleRowParams{};
    b.params[r].temperature = r < 8 ? 0.0f : 1.5f;
    b.params[r].seed = 1000 + r;
    b.params[r].step = r * 3;
  }
  const Sampled got = RunSampleRows(backend(), b, 0, b.rows, -1, 0);
  int best = 0;
  for (int i = 1; i < 500; ++i) best = b.logits[i] > b.logits[best] ? i : best;
  std::set<int32_t> sampled;
  for (int64_t r = 0; r < b.rows; ++r) {
    std::vector<float> l;
    LogProbs lp;
    EXPECT_EQ(got.ids[r], ReferenceRow(b, r, -1, &l, &lp)) << "row " << r;
    if (r < 8) {
      EXPECT_EQ(got.ids[r], best);
    }
    if (r >= 8) sampled.insert(got.ids[r]);
  }
  EXPECT_GT(sampled.size(), 1u) << "eight (seed, step) pairs at temperature 1.5 all drew one token";
}

INSTANTIATE_TEST_SUITE_P(Backends, SampleRowsTest, testing::BackendValues(), testing::BackendParamName);

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// A NaN logit anywhere in a row means a broken model: the row reports
// kNonFiniteLogits and its neighbours are sampled as usual.
TEST_P(SampleRowsTest, RowsWithNaNLogitsReportNoToken) {
  std::mt19937 rng(99);
  Batch b = RandomBatch(rng, 4, 301);
  b.logits[1 * b.vocab + 17] = std::nanf("");
  const Sampled got = RunSampleRows(backend(), b, 0, b.rows, -1, 0);
  ASSERT_EQ(got.ids.size(), 4u);
  EXPECT_EQ(got.ids[1], kNonFiniteLogits);
  for (int r : {0, 2, 3}) {
    EXPECT_GE(got.ids[r], 0);
    EXPECT_LT(got.ids[r], b.vocab);
  }
}

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// Greedy rows with nothing but the argmax to do (the usual decode: no bias,
// no penalty, no logprobs) over a vocabulary of many scan slices: ties
// across slices, +inf in two slices, all -inf, and a NaN row, which keeps
// its logits untouched.
TEST_P(SampleRowsTest, ArgmaxOnlyRowsOverAFullVocabulary) {
  std::mt19937 rng(7);
  const int vocab = 262144 + 123;
  Batch b = RandomBatch(rng, 6, vocab);
  for (SampleRowParams& p : b.params) {
    p = SampleRowParams{};
    p.temperature = 0.0f;
  }
  auto row = [&](int r) { return b.logits.begin() + static_cast<int64_t>(r) * vocab; };
  const float top = *std::max_element(row(1), row(2)) + 1.0f;
  row(1)[200000] = top;  // a tie across slices: the lower id wins
  row(1)[9000] = top;
  row(2)[150000] = INFINITY;  // +inf counts as the largest float, rewritten in place
  row(2)[20000] = INFINITY;
  std::fill(row(3), row(4), -INFINITY);  // all -inf: token 0
  std::fill(row(4), row(5), -INFINITY);
  row(4)[vocab - 1] = -3.0f;  // the only finite logit, in the last (short) slice
  Batch finite = b;
  finite.rows = 5;
  finite.logits.resize(static_cast<size_t>(5) * vocab);
  finite.params.resize(5);
  CheckAgainstReference(backend(), finite, -1, 0);

  row(5)[250000] = std::nanf("");
  const Sampled got = RunSampleRows(backend(), b, 0, b.rows, -1, 0);
  EXPECT_EQ(got.ids[1], 9000);
  EXPECT_EQ(got.ids[2], 20000);
  EXPECT_EQ(got.ids[3], 0);
  EXPECT_EQ(got.ids[4], vocab - 1);
  EXPECT_EQ(got.ids[5], kNonFiniteLogits);
  EXPECT_TRUE(testing::BitwiseEqual(testing::SliceRows(b.logits, vocab, 5, 1),
                                    testing::SliceRows(got.logits, vocab, 5, 1), vocab))
      << "a NaN row's logits stay as they were";
}

}  // namespace
}  // namespace g4
