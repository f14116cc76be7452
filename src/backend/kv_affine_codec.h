// Affine (min/scale) group quantization of one K or V row, the numbers
// behind the kv:affine codec. Groups run along the head dimension, never
// along tokens, so every cut along the token axis is byte-safe.
//
// Per group of `group` elements: bias b = min rounded down to fp16, step
// s = (max - b) / (2^bits - 1) rounded up to fp16, code q = round((x - b)/s)
// clamped to [0, 2^bits - 1]; x ~ b + s q. Rounding b down and s up keeps the
// whole group inside the stored grid, so the error is at most s/2 for every
// element (the fp16 rounding only widens s by at most 2^-10 relative).
// Codes are packed LSB-first (backend/kv_formats.h).
#pragma once

#include <cstdint>

namespace g4 {

struct AffineRowFormat {
  int bits = 4;      // 2..8
  int group = 64;    // divides width
  int64_t width = 0;

  int64_t groups() const { return width / group; }
  int64_t code_bytes() const { return width * bits / 8; }
  // codes + fp16 scales + fp16 biases
  int64_t bytes() const { return code_bytes() + 4 * groups(); }
};

void AffineQuantizeRow(const float* x, const AffineRowFormat& f, uint8_t* codes, uint16_t* scales,
                       uint16_t* biases);
void AffineDequantizeRow(const uint8_t* codes, const uint16_t* scales, const uint16_t* biases,
                         const AffineRowFormat& f, float* x);

// The largest fp16 <= x and the smallest fp16 >= x (x clamped to the finite
// fp16 range first).
uint16_t F16RoundDown(float x);
uint16_t F16RoundUp(float x);

}  // namespace g4
