// Byte formats shared by the KV codecs (backend/kv_*_codec, which write
// them) and the paged-KV kernels (src/backend/<device>/, which read them):
// LSB-first bit packing and the Walsh-Hadamard value rotation. Header-only
// so host and device code use one definition; the layout of whole records
// is in backend/kv_record.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace g4::kvfmt {

// LSB-first packing of `bits`-wide unsigned values (1..8): value i occupies
// bits [i*bits, (i+1)*bits) of the byte stream, bit 0 of byte 0 first; a
// value may straddle a byte boundary. n * bits must be a multiple of 8.
inline int64_t PackedBytes(int64_t n, int bits) { return (n * bits + 7) / 8; }

inline void PackBits(const uint8_t* values, int64_t n, int bits, uint8_t* out) {
  if (bits == 8) {
    std::memcpy(out, values, n);
    return;
  }
  std::memset(out, 0, PackedBytes(n, bits));
  uint64_t acc = 0;
  int filled = 0;
  int64_t o = 0;
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    acc |= static_cast<uint64_t>(values[i] & mask) << filled;
    filled += bits;
    while (filled >= 8) {
      out[o++] = static_cast<uint8_t>(acc);
      acc >>= 8;
      filled -= 8;
    }
  }
  if (filled > 0) out[o] = static_cast<uint8_t>(acc);
}

inline void UnpackBits(const uint8_t* in, int64_t n, int bits, uint8_t* values) {
  if (bits == 8) {
    std::memcpy(values, in, n);
    return;
  }
  const uint32_t mask = (1u << bits) - 1;
  uint64_t acc = 0;
  int avail = 0;
  int64_t p = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (avail < bits) {
      acc |= static_cast<uint64_t>(in[p++]) << avail;
      avail += 8;
    }
    values[i] = static_cast<uint8_t>(acc & mask);
    acc >>= bits;
    avail -= bits;
  }
}

// Unpacks one group of 32 values (always 4 * bits whole bytes) as floats.
inline void UnpackGroup32(const uint8_t* in, int bits, float* out) {
  if (bits == 8) {
    for (int i = 0; i < 32; ++i) out[i] = in[i];
    return;
  }
  if (bits == 4) {
    for (int i = 0; i < 16; ++i) {
      out[2 * i] = in[i] & 15;
      out[2 * i + 1] = in[i] >> 4;
    }
    return;
  }
  // Generic: 8 values per `bits` bytes.
  const uint32_t mask = (1u << bits) - 1;
  for (int c = 0; c < 4; ++c) {
    uint64_t w = 0;
    std::memcpy(&w, in + c * bits, bits);  // little-endian: byte 0 lowest
    for (int i = 0; i < 8; ++i) out[c * 8 + i] = static_cast<float>((w >> (i * bits)) & mask);
  }
}

// In-place unnormalized fast Walsh-Hadamard transform (Sylvester order) of
// x[0..n), n a power of two: x <- H x with H symmetric and H H = n I.
inline void Fwht(float* x, int n) {
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

// TurboQuant's value rotation of one head: forward y = H (s . x) / sqrt(d),
// inverse x = s . (H y) / sqrt(d), with s a fixed +-1 vector (signs[i] is
// +1.0f or -1.0f). Orthogonal, so attention (linear in V) may run in the
// rotated domain and undo the rotation once on its output.
inline void RotateForward(float* x, int d, const float* signs) {
  for (int i = 0; i < d; ++i) x[i] *= signs[i];
  Fwht(x, d);
  const float s = 1.0f / std::sqrt(static_cast<float>(d));
  for (int i = 0; i < d; ++i) x[i] *= s;
}

inline void RotateInverse(float* x, int d, const float* signs) {
  Fwht(x, d);
  const float s = 1.0f / std::sqrt(static_cast<float>(d));
  for (int i = 0; i < d; ++i) x[i] *= s * signs[i];
}

}  // namespace g4::kvfmt
