// Ops::AttentionTurboKv and Ops::UnrotateValues defaults: the host kernels
// over kv:turbo records (format: backend/ops.h TurboKvFormat). Values stay in
// the rotated domain; the caller undoes the rotation once on the output.
#include <cstring>

#include "backend/cpu/kv_attention_common.h"
#include "backend/kv_formats.h"

namespace g4 {
namespace {

constexpr int kGroup = 32;

struct TurboReader {
  static constexpr bool kUnitScale = false;
  const TurboKvFormat& f;
  int head_dim;
  int group = kGroup;

  const float* Key(const uint8_t* rec, int kh, float* codes, float* step, float* offset) const {
    const int64_t first = static_cast<int64_t>(kh) * head_dim;
    if (f.key_bits == 8) {
      const int8_t* p = reinterpret_cast<const int8_t*>(rec + f.k_index) + first;
      for (int e = 0; e < head_dim; ++e) codes[e] = p[e];
    } else {
      const uint8_t* p = rec + f.k_index + first * f.key_bits / 8;
      for (int c = 0; c < head_dim / kGroup; ++c) kvfmt::UnpackGroup32(p + c * 4 * f.key_bits, f.key_bits, codes + c * kGroup);
    }
    const uint16_t* s = reinterpret_cast<const uint16_t*>(rec + f.k_scales) + first / kGroup;
    const uint16_t* z = reinterpret_cast<const uint16_t*>(rec + f.k_zeros) + first / kGroup;
    for (int c = 0; c < head_dim / kGroup; ++c) {
      step[c] = cpu::HalfToFloat(s[c]);
      offset[c] = step[c] * cpu::HalfToFloat(z[c]);  // (i + z) s = s i + s z
    }
    return codes;
  }
  const float* Value(const uint8_t* rec, int kh, float* row) const {
    const int64_t first = static_cast<int64_t>(kh) * head_dim;
    const uint8_t* p = rec + f.v_index + first * f.value_bits / 8;
    const uint16_t* r = reinterpret_cast<const uint16_t*>(rec + f.v_scales) + first / kGroup;
    uint8_t q[kGroup];
    for (int c = 0; c < head_dim / kGroup; ++c) {
      kvfmt::UnpackBits(p + c * 4 * f.value_bits, kGroup, f.value_bits, q);
      const float scale = cpu::HalfToFloat(r[c]);
      for (int e = 0; e < kGroup; ++e) row[c * kGroup + e] = f.value_centroids[q[e]] * scale;
    }
    return row;
  }
};

}  // namespace

void Ops::AttentionTurboKv(const AttentionArgs& args, const EncodedKv& kv, const TurboKvFormat& f) {
  G4_CHECK_MSG(f.key_bits == 2 || f.key_bits == 4 || f.key_bits == 5 || f.key_bits == 8,
               "[cpu] turbo KV key bits must be 2, 4, 5 or 8");
  G4_CHECK_MSG(f.value_bits >= 2 && f.value_bits <= 8 && f.value_centroids, "[cpu] turbo KV value codebook");
  G4_CHECK_MSG(args.head_dim % kGroup == 0, "[cpu] turbo KV head_dim must be whole groups of 32");
  cpu::kvattn::EncodedAttention(args, kv, TurboReader{f, args.head_dim});
}

void Ops::UnrotateValues(float* x, int64_t rows, int head_dim, const float* signs) {
  G4_CHECK_MSG(head_dim > 0 && (head_dim & (head_dim - 1)) == 0, "[cpu] UnrotateValues: head_dim not a power of two");
#pragma omp parallel for schedule(static) if (rows * head_dim >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) kvfmt::RotateInverse(x + r * head_dim, head_dim, signs);
}

}  // namespace g4
