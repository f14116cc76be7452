#include "backend/kv_affine_codec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/kv_formats.h"
#include "core/float16.h"

namespace g4 {
namespace {
constexpr float kF16Max = 65504.0f;

// The next fp16 towards -inf / +inf (finite inputs only).
uint16_t F16Down(uint16_t h) {
  if (h == 0x0000) return 0x8001;  // +0 -> smallest negative subnormal
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}
uint16_t F16Up(uint16_t h) {
  if (h == 0x8000) return 0x0001;  // -0 -> smallest positive subnormal
  return (h & 0x8000) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}
}  // namespace

uint16_t F16RoundDown(float x) {
  x = std::clamp(x, -kF16Max, kF16Max);
  uint16_t h = F32ToF16(x);
  if (F16ToF32(h) > x) h = F16Down(h);
  return h;
}

uint16_t F16RoundUp(float x) {
  x = std::clamp(x, -kF16Max, kF16Max);
  uint16_t h = F32ToF16(x);
  if (F16ToF32(h) < x) h = F16Up(h);
  return h;
}

void AffineQuantizeRow(const float* x, const AffineRowFormat& f, uint8_t* codes, uint16_t* scales,
                       uint16_t* biases) {
  const int levels = (1 << f.bits) - 1;
  uint8_t q[128];
  for (int64_t g = 0; g < f.groups(); ++g) {
    const float* xg = x + g * f.group;
    float lo = xg[0], hi = xg[0];
    for (int i = 1; i < f.group; ++i) {
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    const uint16_t b16 = F16RoundDown(lo);
    const float b = F16ToF32(b16);
    const uint16_t s16 = F16RoundUp((hi - b) / levels);
    const float s = F16ToF32(s16);
    for (int i = 0; i < f.group; ++i) {
      const float c = s > 0 ? std::nearbyint((xg[i] - b) / s) : 0.0f;
      q[i] = static_cast<uint8_t>(std::clamp(c, 0.0f, static_cast<float>(levels)));
    }
    kvfmt::PackBits(q, f.group, f.bits, codes + g * f.group * f.bits / 8);
    scales[g] = s16;
    biases[g] = b16;
  }
}

void AffineDequantizeRow(const uint8_t* codes, const uint16_t* scales, const uint16_t* biases,
                         const AffineRowFormat& f, float* x) {
  uint8_t q[128];
  for (int64_t g = 0; g < f.groups(); ++g) {
    kvfmt::UnpackBits(codes + g * f.group * f.bits / 8, f.group, f.bits, q);
    const float s = F16ToF32(scales[g]), b = F16ToF32(biases[g]);
    for (int i = 0; i < f.group; ++i) x[g * f.group + i] = std::fma(s, static_cast<float>(q[i]), b);
  }
}

}  // namespace g4
