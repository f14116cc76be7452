// TurboQuant numbers for one token row of K or V (all KV heads), the
// kv:turbo codec (as mlx-bun, github.com/joshuarossi/mlx-bun, implements
// TurboQuant; docs/kv-cache.md).
//
// Keys, per group of 32 along the head dimension, no rotation:
//   8 bits: s = (max - min) / 254, z = round((max + min) / 2s),
//           i = clip(round(x/s - z), -127, 127) stored as int8;
//   2/4/5 bits: s = (max - min) / (2^b - 1), z = round(min / s),
//           i = clip(round(x/s - z), 0, 2^b - 1) packed LSB-first;
//   x ~ (i + z) s. s and z are stored as fp16 and the indices are computed
//   with the stored s, so the reconstruction uses exactly the grid the
//   encoder chose.
// Values, per head: multiply by a fixed +-1 vector (std::mt19937 seeded 42,
// one per head_dim), Walsh-Hadamard transform scaled 1/sqrt(d); then per
// group of 32: r = RMS (fp16), index = Lloyd-Max cell of y / (r + 1e-8),
// packed LSB-first; y ~ centroid[index] r. Decoding may stop in the rotated
// domain: attention is linear in V, so the inverse rotation can be applied
// once to the attention output instead of once per cached token.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace g4 {

constexpr int kTurboGroup = 32;

struct TurboRowFormat {
  int key_bits = 8;    // 2, 4, 5 or 8
  int value_bits = 3;  // 2, 3, 4, 5 or 8
  int head_dim = 128;  // power of two, 32..512
  int num_heads = 1;   // KV heads in the row

  int64_t width() const { return static_cast<int64_t>(num_heads) * head_dim; }
  int64_t groups() const { return width() / kTurboGroup; }
  int64_t key_index_bytes() const { return width() * key_bits / 8; }
  int64_t value_index_bytes() const { return width() * value_bits / 8; }
  // key indices + fp16 key scales and zeros + value indices + fp16 value scales
  int64_t bytes() const { return key_index_bytes() + value_index_bytes() + 6 * groups(); }
};

// Checks bit widths and head_dim; the message names the offending value.
Status ValidateTurboFormat(const TurboRowFormat& f);

void TurboEncodeKeysRow(const float* x, const TurboRowFormat& f, uint8_t* index, uint16_t* scales,
                        uint16_t* zeros);
void TurboDecodeKeysRow(const uint8_t* index, const uint16_t* scales, const uint16_t* zeros,
                        const TurboRowFormat& f, float* x);

void TurboEncodeValuesRow(const float* x, const TurboRowFormat& f, uint8_t* packed, uint16_t* scales);
// rotated: leave the result in the rotated domain (no inverse transform).
void TurboDecodeValuesRow(const uint8_t* packed, const uint16_t* scales, const TurboRowFormat& f,
                          bool rotated, float* x);

// The +-1.0f sign vector of the value rotation for head_dim d (a power of
// two, 32..512); stable for the life of the process and across builds.
const float* TurboValueSigns(int head_dim);

}  // namespace g4
