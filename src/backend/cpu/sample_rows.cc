// Ops::SampleRows on the host: each row runs the reference Sampler
// (backend/sampler.h) with the parameters, ranges and (seed, step) of its
// SampleRowParams, so the CPU backend matches the reference by
// construction. Rows are independent and run in parallel.
#include <limits>
#include <map>
#include <span>

#include "backend/cpu/kernels.h"
#include "backend/sampler.h"
#include "core/check.h"

namespace g4::cpu {
namespace {

static_assert(sizeof(int) == sizeof(int32_t), "history arrays are read as int");

SamplingParams ToSamplingParams(const SampleRowParams& r, const SampleArgs& a, int top_logprobs) {
  SamplingParams p;
  CopyScalarParams(r, &p);
  for (int32_t i = 0; i < r.bias_count; ++i) {
    p.logit_bias[a.bias_ids[r.bias_begin + i]] = a.bias_values[r.bias_begin + i];
  }
  p.xtc_exempt_tokens.assign(a.exempt_ids + r.exempt_begin, a.exempt_ids + r.exempt_begin + r.exempt_count);
  p.seed = r.seed;
  p.top_logprobs = top_logprobs;
  return p;
}

}  // namespace

void SampleRows(const SampleArgs& a) {
  const int64_t rows = a.logits.rows;
  const int vocab = static_cast<int>(a.logits.cols);
  G4_CHECK_MSG(a.logits.dtype == DType::kF32, "[cpu] SampleRows: logits must be F32");
  G4_CHECK_MSG(a.out_ids.dtype == DType::kI32 && a.out_ids.rows == rows && a.out_ids.cols >= 1,
               "[cpu] SampleRows: out_ids must be I32 [R, 1]");
  const bool logprobs = a.top_logprobs >= 0 && a.logprob_ids.data != nullptr && a.logprob_values.data != nullptr;
  if (logprobs) {
    G4_CHECK_MSG(a.logprob_ids.dtype == DType::kI32 && a.logprob_values.dtype == DType::kF32 &&
                     a.logprob_ids.rows == rows && a.logprob_values.rows == rows &&
                     a.logprob_ids.cols == 1 + a.top_logprobs && a.logprob_values.cols == 1 + a.top_logprobs,
                 "[cpu] SampleRows: logprob outputs must be [R, 1 + top_logprobs]");
  }
  if (rows == 0) return;
  G4_CHECK_MSG(a.params != nullptr && vocab > 0, "[cpu] SampleRows: no params or empty vocabulary");
  for (int64_t r = 0; r < rows; ++r) {
    const SampleRowParams& p = a.params[r];
    G4_CHECK_MSG(p.bias_count >= 0 && p.exempt_count >= 0 && p.history_count >= 0,
                 "[cpu] SampleRows: negative range");
    G4_CHECK_MSG((p.bias_count == 0 || (a.bias_ids && a.bias_values)) && (p.exempt_count == 0 || a.exempt_ids) &&
                     (p.history_count == 0 || a.history),
                 "[cpu] SampleRows: a range points into a missing array");
  }

#pragma omp parallel for schedule(dynamic, 1) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const SampleRowParams& rp = a.params[r];
    Sampler sampler(ToSamplingParams(rp, a, logprobs ? a.top_logprobs : 0), vocab);
    const std::span<const int> history(a.history == nullptr ? nullptr : a.history + rp.history_begin,
                                       static_cast<size_t>(rp.history_count));
    LogProbs lp;
    float* row = a.logits.f32() + r * a.logits.stride;
    const int token = sampler.Sample(row, history, rp.seed, rp.step, logprobs ? &lp : nullptr);
    a.out_ids.i32()[r * a.out_ids.stride] = token;
    if (logprobs) {
      int32_t* ids = a.logprob_ids.i32() + r * a.logprob_ids.stride;
      float* values = a.logprob_values.f32() + r * a.logprob_values.stride;
      ids[0] = token;
      values[0] = lp.logprob;
      // Fewer alternatives than asked only when the vocabulary is smaller.
      for (int i = 0; i < a.top_logprobs; ++i) {
        const bool have = static_cast<size_t>(i) < lp.top.size();
        ids[1 + i] = have ? lp.top[i].id : -1;
        values[1 + i] = have ? lp.top[i].logprob : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

}  // namespace g4::cpu
