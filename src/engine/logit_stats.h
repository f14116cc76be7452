// Comparing next-token distributions given as logits rows: the one KL
// helper `g4 perplexity --kl` and `g4 kv-eval` share.
#pragma once

#include <cstdint>
#include <span>

namespace g4 {

// log(sum(exp(row))) in double precision.
double LogSumExpD(std::span<const float> row);
// KL(P || Q) of the softmax distributions of two logits rows of equal
// length, in nats, clamped at 0 (rounding can leave a tiny negative for
// identical rows).
double KlDivergence(std::span<const float> p, std::span<const float> q);
// Whether both rows have their largest value at the same index (first on ties).
bool SameTop1(std::span<const float> p, std::span<const float> q);

}  // namespace g4
