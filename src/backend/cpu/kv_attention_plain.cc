// Ops::AttentionPlainKv default: the host kernel over kv:plain records (float32
// K and V rows), read in place.
#include "backend/cpu/kv_attention_common.h"

namespace g4 {
namespace {

struct PlainReader {
  static constexpr bool kUnitScale = true;
  const PlainKvFormat& f;
  int head_dim;
  int group;

  const float* Key(const uint8_t* rec, int kh, float*, float*, float*) const {
    return reinterpret_cast<const float*>(rec + f.k) + static_cast<int64_t>(kh) * head_dim;
  }
  const float* Value(const uint8_t* rec, int kh, float*) const {
    return reinterpret_cast<const float*>(rec + f.v) + static_cast<int64_t>(kh) * head_dim;
  }
};

}  // namespace

void Ops::AttentionPlainKv(const AttentionArgs& args, const EncodedKv& kv, const PlainKvFormat& f) {
  G4_CHECK_MSG(args.head_dim > 0 && f.k % 4 == 0 && f.v % 4 == 0 && kv.record_bytes % 4 == 0,
               "[cpu] plain KV records must be float-aligned");
  cpu::kvattn::EncodedAttention(args, kv, PlainReader{f, args.head_dim, args.head_dim});
}

}  // namespace g4
