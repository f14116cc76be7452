#include "backend/kv_turbo_codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/kv_formats.h"
#include "backend/lloyd_max.h"
#include "core/check.h"
#include "core/float16.h"

namespace g4 {
namespace {

bool IsPowerOfTwo(int x) { return x > 0 && (x & (x - 1)) == 0; }

// fp16 of a positive step, never 0 (a 0 step would divide by zero) and never inf.
uint16_t StepToF16(float s) {
  uint16_t h = F32ToF16(std::min(s, 65504.0f));
  if (F16ToF32(h) <= 0) h = 0x0001;
  return h;
}

}  // namespace

Status ValidateTurboFormat(const TurboRowFormat& f) {
  if (f.key_bits != 2 && f.key_bits != 4 && f.key_bits != 5 && f.key_bits != 8)
    return InvalidArgument("[kv] turbo key bits must be 2, 4, 5 or 8, not " + std::to_string(f.key_bits));
  if (!FindLloydMaxCodebook(f.value_bits))
    return InvalidArgument("[kv] turbo value bits must be 2, 3, 4, 5 or 8, not " + std::to_string(f.value_bits));
  if (!IsPowerOfTwo(f.head_dim) || f.head_dim < 32 || f.head_dim > 512)
    return Unsupported("[kv] turbo needs a power-of-two head_dim in 32..512, not " + std::to_string(f.head_dim));
  if (f.num_heads <= 0) return InvalidArgument("[kv] turbo needs at least one KV head");
  return Status::Ok();
}

const float* TurboValueSigns(int head_dim) {
  G4_CHECK_MSG(IsPowerOfTwo(head_dim) && head_dim >= 32 && head_dim <= 512,
               "[kv] turbo value rotation needs a power-of-two head_dim in 32..512");
  static const auto* table = [] {
    auto* t = new std::array<std::vector<float>, 10>();
    for (int log = 5; log <= 9; ++log) {
      std::mt19937 rng(42);  // std::mt19937 is fully specified: identical everywhere
      std::vector<float>& s = (*t)[log];
      s.resize(1 << log);
      for (float& x : s) x = (rng() >> 31) ? -1.0f : 1.0f;
    }
    return t;
  }();
  int log = 0;
  while ((1 << log) < head_dim) ++log;
  return (*table)[log].data();
}

void TurboEncodeKeysRow(const float* x, const TurboRowFormat& f, uint8_t* index, uint16_t* scales,
                        uint16_t* zeros) {
  uint8_t q[kTurboGroup];
  for (int64_t g = 0; g < f.groups(); ++g) {
    const float* xg = x + g * kTurboGroup;
    float lo = xg[0], hi = xg[0];
    for (int i = 1; i < kTurboGroup; ++i) {
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    float s, z;
    if (f.key_bits == 8) {
      // A constant group still needs a usable step: let +-127 reach it.
      s = F16ToF32(StepToF16(hi > lo ? (hi - lo) / 254.0f : std::max(std::fabs(lo), 1e-6f) / 127.0f));
      z = hi > lo ? std::nearbyint((hi + lo) / (2.0f * s)) : 0.0f;
    } else {
      const float levels = static_cast<float>((1 << f.key_bits) - 1);
      s = F16ToF32(StepToF16(hi > lo ? (hi - lo) / levels : std::max(std::fabs(lo), 1e-6f)));
      z = std::nearbyint(lo / s);
    }
    const uint16_t z16 = F32ToF16(z);
    z = F16ToF32(z16);
    scales[g] = F32ToF16(s);
    zeros[g] = z16;
    if (f.key_bits == 8) {
      int8_t* out = reinterpret_cast<int8_t*>(index) + g * kTurboGroup;
      for (int i = 0; i < kTurboGroup; ++i)
        out[i] = static_cast<int8_t>(std::clamp(std::nearbyint(xg[i] / s - z), -127.0f, 127.0f));
    } else {
      const float top = static_cast<float>((1 << f.key_bits) - 1);
      for (int i = 0; i < kTurboGroup; ++i)
        q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(xg[i] / s - z), 0.0f, top));
      kvfmt::PackBits(q, kTurboGroup, f.key_bits, index + g * kTurboGroup * f.key_bits / 8);
    }
  }
}

void TurboDecodeKeysRow(const uint8_t* index, const uint16_t* scales, const uint16_t* zeros,
                        const TurboRowFormat& f, float* x) {
  uint8_t q[kTurboGroup];
  for (int64_t g = 0; g < f.groups(); ++g) {
    const float s = F16ToF32(scales[g]), z = F16ToF32(zeros[g]);
    float* xg = x + g * kTurboGroup;
    if (f.key_bits == 8) {
      const int8_t* in = reinterpret_cast<const int8_t*>(index) + g * kTurboGroup;
      for (int i = 0; i < kTurboGroup; ++i) xg[i] = (static_cast<float>(in[i]) + z) * s;
    } else {
      kvfmt::UnpackBits(index + g * kTurboGroup * f.key_bits / 8, kTurboGroup, f.key_bits, q);
      for (int i = 0; i < kTurboGroup; ++i) xg[i] = (static_cast<float>(q[i]) + z) * s;
    }
  }
}

void TurboEncodeValuesRow(const float* x, const TurboRowFormat& f, uint8_t* packed, uint16_t* scales) {
  const LloydMaxCodebook& book = *FindLloydMaxCodebook(f.value_bits);
  const float* signs = TurboValueSigns(f.head_dim);
  std::vector<float> y(x, x + f.width());
  for (int h = 0; h < f.num_heads; ++h) kvfmt::RotateForward(y.data() + h * f.head_dim, f.head_dim, signs);
  uint8_t q[kTurboGroup];
  for (int64_t g = 0; g < f.groups(); ++g) {
    const float* yg = y.data() + g * kTurboGroup;
    float ss = 0;
    for (int i = 0; i < kTurboGroup; ++i) ss += yg[i] * yg[i];
    const uint16_t r16 = F32ToF16(std::min(std::sqrt(ss / kTurboGroup), 65504.0f));
    const float denom = F16ToF32(r16) + 1e-8f;
    for (int i = 0; i < kTurboGroup; ++i) q[i] = static_cast<uint8_t>(book.Bucket(yg[i] / denom));
    kvfmt::PackBits(q, kTurboGroup, f.value_bits, packed + g * kTurboGroup * f.value_bits / 8);
    scales[g] = r16;
  }
}

void TurboDecodeValuesRow(const uint8_t* packed, const uint16_t* scales, const TurboRowFormat& f,
                          bool rotated, float* x) {
  const LloydMaxCodebook& book = *FindLloydMaxCodebook(f.value_bits);
  uint8_t q[kTurboGroup];
  for (int64_t g = 0; g < f.groups(); ++g) {
    kvfmt::UnpackBits(packed + g * kTurboGroup * f.value_bits / 8, kTurboGroup, f.value_bits, q);
    const float r = F16ToF32(scales[g]);
    for (int i = 0; i < kTurboGroup; ++i) x[g * kTurboGroup + i] = book.centroids[q[i]] * r;
  }
  if (rotated) return;
  const float* signs = TurboValueSigns(f.head_dim);
  for (int h = 0; h < f.num_heads; ++h) kvfmt::RotateInverse(x + h * f.head_dim, f.head_dim, signs);
}

}  // namespace g4
