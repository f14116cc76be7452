// RoPE inverse-frequency tables, as transformers' modeling_rope_utils.py
// computes them for Gemma 4 (the "default" and "proportional" types).
#pragma once

#include <vector>

#include "core/status.h"
#include "io/config.h"

namespace g4 {

// head_dim/2 inverse frequencies, computed in float32 as transformers does.
// default:      f_i = 1 / theta^(2i / head_dim)
// proportional: the first floor(rho * head_dim / 2) slots as default (the
//               exponent's denominator stays the full head_dim), the rest 0
//               (those dims pass through unrotated).
// Both divide by `factor`.
StatusOr<std::vector<float>> RopeInverseFrequencies(const RopeParams& params, int head_dim);

}  // namespace g4
