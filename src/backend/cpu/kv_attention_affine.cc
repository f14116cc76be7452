// Ops::AttentionAffineKv default: the host kernel over kv:affine records
// (format: backend/ops.h AffineKvFormat).
#include "backend/cpu/kv_attention_common.h"
#include "backend/kv_formats.h"

namespace g4 {
namespace {

struct AffineReader {
  static constexpr bool kUnitScale = false;
  const AffineKvFormat& f;
  int head_dim;
  int group;

  const float* Key(const uint8_t* rec, int kh, float* codes, float* step, float* offset) const {
    Unpack(rec + f.k_codes, kh, codes);
    Scales(rec + f.k_scales, rec + f.k_biases, kh, step, offset);
    return codes;
  }
  const float* Value(const uint8_t* rec, int kh, float* row) const {
    Unpack(rec + f.v_codes, kh, row);
    float step[512 / 32], offset[512 / 32];
    Scales(rec + f.v_scales, rec + f.v_biases, kh, step, offset);
    for (int c = 0; c < head_dim / group; ++c)
      for (int e = 0; e < group; ++e) row[c * group + e] = step[c] * row[c * group + e] + offset[c];
    return row;
  }
  void Unpack(const uint8_t* plane, int kh, float* out) const {
    const uint8_t* p = plane + static_cast<int64_t>(kh) * head_dim * f.bits / 8;
    for (int c = 0; c < head_dim / 32; ++c) kvfmt::UnpackGroup32(p + c * 4 * f.bits, f.bits, out + c * 32);
  }
  void Scales(const uint8_t* scales, const uint8_t* biases, int kh, float* step, float* offset) const {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(scales) + static_cast<int64_t>(kh) * (head_dim / group);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(biases) + static_cast<int64_t>(kh) * (head_dim / group);
    for (int c = 0; c < head_dim / group; ++c) {
      step[c] = cpu::HalfToFloat(s[c]);
      offset[c] = cpu::HalfToFloat(b[c]);
    }
  }
};

}  // namespace

void Ops::AttentionAffineKv(const AttentionArgs& args, const EncodedKv& kv, const AffineKvFormat& f) {
  G4_CHECK_MSG(f.bits >= 2 && f.bits <= 8, "[cpu] affine KV bits must be 2..8");
  G4_CHECK_MSG(f.group_size == 32 || f.group_size == 64 || f.group_size == 128,
               "[cpu] affine KV group must be 32, 64 or 128");
  G4_CHECK_MSG(args.head_dim % f.group_size == 0 && args.head_dim <= 512 && args.head_dim % 32 == 0,
               "[cpu] affine KV head_dim must be whole groups, at most 512");
  cpu::kvattn::EncodedAttention(args, kv, AffineReader{f, args.head_dim, f.group_size});
}

}  // namespace g4
