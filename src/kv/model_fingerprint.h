// A model fingerprint for persisted caches: a cache is only valid for the
// exact weights that produced it. Hashes the attention geometry and, for
// every checkpoint tensor (sorted by name), its name, dtype, shape and 16
// evenly spaced 64-byte samples of its data, so a fine-tune with the same
// config gets a different fingerprint at the cost of a few pages per tensor.
#pragma once

#include <string>

#include "io/config.h"
#include "io/gemma4_weights.h"

namespace g4 {

// 16 hex digits.
std::string ModelFingerprint(const Gemma4Config& config, const Gemma4Weights& weights);

}  // namespace g4
