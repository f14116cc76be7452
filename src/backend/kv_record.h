// KV records: the byte format of one token's K and V for one layer (all its
// KV heads), the unit every KV codec writes and every KV kernel reads.
// Groups run along head_dim and never span tokens or heads, so any cut along
// the token axis is byte-safe. With W = num_kv_heads x head_dim:
//
//   kv:plain[:bf16|:f16]  K [W] | V [W]  in f32 (default), bf16 or f16
//   kv:affine:b:g         K codes | K scales | K biases | V codes | V scales | V biases
//                         (b-bit codes LSB-first, fp16 scale/bias per g elements; x = s q + b)
//   kv:turbo:kKvV         K idx | K scales | K zeros | V idx | V scales
//                         (groups of 32; keys k = (i + z) s, values Lloyd-Max
//                         indices of the Walsh-Hadamard-rotated row times an fp16 RMS)
//
// The numbers behind each codec (rounding rules, codebooks, the rotation)
// are in kv_affine_codec.h and kv_turbo_codec.h; EncodeKvRecords /
// DecodeKvRecords here are the host reference every backend's KV write and
// attention kernels are tested against.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace g4 {

// A codec as the user names it (the CODEC part of a --kv spec).
struct KvCodecSpec {
  enum class Kind : uint8_t { kPlain, kAffine, kTurbo };
  Kind kind = Kind::kPlain;
  DType plain_dtype = DType::kF32;  // plain: F32, BF16 or F16
  int bits = 0;                     // affine: 4 or 8
  int group = 0;                    // affine: 32, 64 or 128
  int key_bits = 0;                 // turbo: 2, 4, 5 or 8
  int value_bits = 0;               // turbo: 2, 3, 4, 5 or 8

  static KvCodecSpec Plain(DType dtype = DType::kF32) {
    KvCodecSpec s;
    s.plain_dtype = dtype;
    return s;
  }
  static KvCodecSpec Affine(int bits, int group) {
    KvCodecSpec s;
    s.kind = Kind::kAffine;
    s.bits = bits;
    s.group = group;
    return s;
  }
  static KvCodecSpec Turbo(int key_bits, int value_bits) {
    KvCodecSpec s;
    s.kind = Kind::kTurbo;
    s.key_bits = key_bits;
    s.value_bits = value_bits;
    return s;
  }
  bool is_plain() const { return kind == Kind::kPlain; }
  // "kv:plain", "kv:plain:bf16", "kv:affine:4:64", "kv:turbo:k8v3"
  std::string signature() const;
  // Parses a signature back (persistence); the message names the text.
  static StatusOr<KvCodecSpec> FromSignature(const std::string& signature);
  bool operator==(const KvCodecSpec&) const = default;
};

// A codec laid out for one layer's geometry: plane offsets within a record.
struct KvRecordFormat {
  KvCodecSpec spec;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t record_bytes = 0;
  // Byte offsets of the planes in a record. Plain: k_codes / v_codes are
  // the K and V rows. Turbo: k_biases holds the fp16 zeros, v_biases unused.
  int64_t k_codes = 0, k_scales = 0, k_biases = 0;
  int64_t v_codes = 0, v_scales = 0, v_biases = 0;

  // Checks the codec against the geometry: plain takes any head_dim; affine
  // needs head_dim a multiple of its group (a group wider than head_dim is
  // narrowed to head_dim when head_dim is 32, 64 or 128; otherwise it is an
  // error naming both); turbo needs a power-of-two head_dim in [32, 512].
  static StatusOr<KvRecordFormat> Make(const KvCodecSpec& spec, int num_kv_heads, int head_dim);

  int64_t width() const { return static_cast<int64_t>(num_kv_heads) * head_dim; }
  bool rotates_values() const { return spec.kind == KvCodecSpec::Kind::kTurbo; }
  std::string signature() const { return spec.signature(); }
  bool operator==(const KvRecordFormat&) const = default;
};

// k, v: [n, width] float32 -> n consecutive records.
void EncodeKvRecords(const KvRecordFormat& f, const float* k, const float* v, int64_t n, uint8_t* records);
// n consecutive records -> k, v [n, width] float32, values in the original
// domain (rotated_values: turbo values left in the rotated domain).
void DecodeKvRecords(const KvRecordFormat& f, const uint8_t* records, int64_t n, float* k, float* v,
                     bool rotated_values = false);

// Turbo constants a kernel needs: the value codebook centroids [2^value_bits]
// and the rotation's +-1 sign vector [head_dim]. Process-lifetime host
// memory (device backends upload copies).
const float* TurboValueCentroids(int value_bits);
const float* TurboValueSigns(int head_dim);

}  // namespace g4
