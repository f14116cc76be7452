// KvCodec: numbers <-> bytes for one token of one layer's K and V (all KV
// heads), as one fixed-size record, plus attention over such records. Codecs
// know nothing of layout (kv_store.h) or policy (delayed_cache.cc), and
// groups never span tokens, so any cut along the token axis is byte-safe.
//
// Records:
//   kv:plain           K f32 [W] | V f32 [W]                          (8W bytes)
//   kv:affine:b:g      K codes | K scales | K biases | V codes | ...  (2 (W b/8 + 4 W/g))
//   kv:turbo:kKvV      K idx | K scales | K zeros | V idx | V scales  (W (K+V)/8 + 6 W/32)
// with W = KV heads x head_dim; scales/biases/zeros are fp16.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/ops.h"
#include "core/status.h"
#include "kv/layer_cache.h"

namespace g4 {

struct KvCodecSpec {
  enum class Kind { kPlain, kAffine, kTurbo };
  Kind kind = Kind::kPlain;
  int bits = 0;        // affine: 4 or 8
  int group = 0;       // affine: 32, 64 or 128
  int key_bits = 0;    // turbo: 2, 4, 5 or 8
  int value_bits = 0;  // turbo: 2, 3, 4, 5 or 8

  static KvCodecSpec Plain() { return {}; }
  static KvCodecSpec Affine(int bits, int group) { return {Kind::kAffine, bits, group, 0, 0}; }
  static KvCodecSpec Turbo(int key_bits, int value_bits) { return {Kind::kTurbo, 0, 0, key_bits, value_bits}; }
  // "kv:plain", "kv:affine:4:64", "kv:turbo:k8v3"
  std::string signature() const;
  // Parses a signature back (persistence); the message names the text.
  static StatusOr<KvCodecSpec> FromSignature(const std::string& signature);
  bool operator==(const KvCodecSpec&) const = default;
};

class KvCodec {
 public:
  // A codec for layers with `num_kv_heads` heads of `head_dim`. An affine
  // group wider than head_dim is narrowed to head_dim (groups never span
  // heads), and the codec's spec() says so. Unsupported combinations (e.g.
  // turbo on a head_dim that is not a power of two) are an error.
  static StatusOr<std::shared_ptr<const KvCodec>> Make(const KvCodecSpec& spec, int num_kv_heads, int head_dim);

  virtual ~KvCodec() = default;
  const KvCodecSpec& spec() const { return spec_; }
  std::string signature() const { return spec_.signature(); }
  int num_kv_heads() const { return num_kv_heads_; }
  int head_dim() const { return head_dim_; }
  int64_t width() const { return static_cast<int64_t>(num_kv_heads_) * head_dim_; }
  virtual int64_t record_bytes() const = 0;

  // k, v: [n, width] -> n consecutive records.
  virtual void Encode(const float* k, const float* v, int64_t n, uint8_t* records) const = 0;
  // n consecutive records -> k, v [n, width] (values in the original domain).
  virtual void Decode(const uint8_t* records, int64_t n, float* k, float* v) const = 0;
  // Attention (KvAttention::Attend contract) over records.
  virtual void Attend(Ops& ops, const AttentionArgs& query, const EncodedKv& kv) const = 0;
  // Sets the plain port of `view` when records are float32 K/V.
  virtual void FillPlainPort(const EncodedKv& kv, KvView* view) const {}
  virtual const AffineKvFormat* affine_format() const { return nullptr; }
  // Rotated-value codecs: attention in the rotated domain and its inverse.
  virtual bool rotates_values() const { return false; }
  virtual void AttendRotated(Ops& ops, const AttentionArgs& query, const EncodedKv& kv) const {}
  virtual void RestoreValues(Ops& ops, float* out, int64_t rows) const {}

 protected:
  KvCodec(KvCodecSpec spec, int num_kv_heads, int head_dim)
      : spec_(spec), num_kv_heads_(num_kv_heads), head_dim_(head_dim) {}

 private:
  KvCodecSpec spec_;
  int num_kv_heads_;
  int head_dim_;
};

// The attention view over records of one codec (what KvView::attention points
// to); exposes the codec's optional ports.
class CodecKvView final : public KvAttention, public RotatedValueView {
 public:
  void Reset(const KvCodec* codec, const EncodedKv& kv);
  KvView MakeView() const;  // pos, num_keys, plain port if any, attention = this

  void Attend(Ops& ops, const AttentionArgs& query) const override { codec_->Attend(ops, query, kv_); }
  const QuantizedKvView* quantized() const override { return codec_->affine_format() ? &quantized_ : nullptr; }
  const RotatedValueView* rotated_values() const override { return codec_->rotates_values() ? this : nullptr; }
  void AttendRotated(Ops& ops, const AttentionArgs& query) const override { codec_->AttendRotated(ops, query, kv_); }
  void RestoreValues(Ops& ops, float* out, int64_t rows, int head_dim) const override {
    codec_->RestoreValues(ops, out, rows);
  }

 private:
  const KvCodec* codec_ = nullptr;
  EncodedKv kv_;
  QuantizedKvView quantized_;
};

}  // namespace g4
