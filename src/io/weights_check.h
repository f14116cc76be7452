// The numerics guard: after loading, weights must be finite. A checkpoint
// with NaN or Inf in a norm or a weight (a bad conversion, a truncated
// download patched with garbage) otherwise runs "successfully" and produces
// <pad> tokens, NaN logits and PPL = nan with exit status 0.
//
// Cheap by design, so it runs on every load: small vectors (norms, scalars)
// are checked whole, matrices by a sample of kSampledRows rows spread over
// the matrix (first and last included), dequantized exactly as the kernels
// see them, so NaN/Inf in an affine scale or bias of a sampled row is found
// too. For a 9 GB checkpoint this touches a few MB. A NaN elsewhere in an
// unsampled row is not found: the check catches broken conversions, it does
// not prove a file clean.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "io/weight_matrix.h"

namespace g4 {

inline constexpr int kSampledRows = 8;

// Corrupt naming `name`, the element and the value when any of v[0, n) is
// NaN or infinite: "[weights] model.norm.weight: element 3 is nan".
Status CheckVectorFinite(const float* v, int64_t n, const std::string& name);

// Corrupt naming `name`, the row and the column when a sampled row of `m`
// dequantizes to a non-finite value.
Status CheckMatrixSampleFinite(const WeightMatrix& m, const std::string& name);

}  // namespace g4
