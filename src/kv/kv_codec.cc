#include "kv/kv_codec.h"

#include <cstring>
#include <regex>

#include "kv/affine_codec.h"
#include "kv/lloyd_max.h"
#include "kv/turbo_codec.h"

namespace g4 {
namespace {

class PlainCodec final : public KvCodec {
 public:
  PlainCodec(int heads, int head_dim) : KvCodec(KvCodecSpec::Plain(), heads, head_dim) {}
  int64_t record_bytes() const override { return 2 * width() * sizeof(float); }
  void Encode(const float* k, const float* v, int64_t n, uint8_t* records) const override {
    const int64_t w = width();
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(records + t * record_bytes(), k + t * w, w * sizeof(float));
      std::memcpy(records + t * record_bytes() + w * sizeof(float), v + t * w, w * sizeof(float));
    }
  }
  void Decode(const uint8_t* records, int64_t n, float* k, float* v) const override {
    const int64_t w = width();
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(k + t * w, records + t * record_bytes(), w * sizeof(float));
      std::memcpy(v + t * w, records + t * record_bytes() + w * sizeof(float), w * sizeof(float));
    }
  }
  void FillPlainPort(const EncodedKv& kv, KvView* view) const override {
    view->k = reinterpret_cast<const float*>(kv.records);
    view->v = view->k + width();
    view->stride = 2 * width();
  }
  void Attend(Ops& ops, const AttentionArgs& query, const EncodedKv& kv) const override {
    ops.AttentionPlainKv(query, kv, PlainKvFormat{0, static_cast<int64_t>(width() * sizeof(float))});
  }
};

class AffineCodec final : public KvCodec {
 public:
  AffineCodec(const KvCodecSpec& spec, int heads, int head_dim)
      : KvCodec(spec, heads, head_dim), row_{spec.bits, spec.group, width()} {
    format_.bits = spec.bits;
    format_.group_size = spec.group;
    format_.k_codes = 0;
    format_.k_scales = row_.code_bytes();
    format_.k_biases = format_.k_scales + 2 * row_.groups();
    format_.v_codes = row_.bytes();
    format_.v_scales = format_.v_codes + row_.code_bytes();
    format_.v_biases = format_.v_scales + 2 * row_.groups();
  }
  int64_t record_bytes() const override { return 2 * row_.bytes(); }
  void Encode(const float* k, const float* v, int64_t n, uint8_t* records) const override {
    for (int64_t t = 0; t < n; ++t) {
      uint8_t* r = records + t * record_bytes();
      AffineQuantizeRow(k + t * width(), row_, r + format_.k_codes, Plane(r, format_.k_scales),
                        Plane(r, format_.k_biases));
      AffineQuantizeRow(v + t * width(), row_, r + format_.v_codes, Plane(r, format_.v_scales),
                        Plane(r, format_.v_biases));
    }
  }
  void Decode(const uint8_t* records, int64_t n, float* k, float* v) const override {
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* r = records + t * record_bytes();
      AffineDequantizeRow(r + format_.k_codes, Plane(r, format_.k_scales), Plane(r, format_.k_biases), row_,
                          k + t * width());
      AffineDequantizeRow(r + format_.v_codes, Plane(r, format_.v_scales), Plane(r, format_.v_biases), row_,
                          v + t * width());
    }
  }
  void Attend(Ops& ops, const AttentionArgs& query, const EncodedKv& kv) const override {
    ops.AttentionAffineKv(query, kv, format_);
  }
  const AffineKvFormat* affine_format() const override { return &format_; }

 private:
  static uint16_t* Plane(uint8_t* r, int64_t off) { return reinterpret_cast<uint16_t*>(r + off); }
  static const uint16_t* Plane(const uint8_t* r, int64_t off) { return reinterpret_cast<const uint16_t*>(r + off); }
  AffineRowFormat row_;
  AffineKvFormat format_;
};

class TurboCodec final : public KvCodec {
 public:
  TurboCodec(const KvCodecSpec& spec, int heads, int head_dim)
      : KvCodec(spec, heads, head_dim), row_{spec.key_bits, spec.value_bits, head_dim, heads} {
    format_.key_bits = spec.key_bits;
    format_.value_bits = spec.value_bits;
    format_.k_index = 0;
    format_.k_scales = row_.key_index_bytes();
    format_.k_zeros = format_.k_scales + 2 * row_.groups();
    format_.v_index = format_.k_zeros + 2 * row_.groups();
    format_.v_scales = format_.v_index + row_.value_index_bytes();
    format_.value_centroids = FindLloydMaxCodebook(spec.value_bits)->centroids;
    signs_ = TurboValueSigns(head_dim);
  }
  int64_t record_bytes() const override { return row_.bytes(); }
  void Encode(const float* k, const float* v, int64_t n, uint8_t* records) const override {
    for (int64_t t = 0; t < n; ++t) {
      uint8_t* r = records + t * record_bytes();
      TurboEncodeKeysRow(k + t * width(), row_, r + format_.k_index, Plane(r, format_.k_scales),
                         Plane(r, format_.k_zeros));
      TurboEncodeValuesRow(v + t * width(), row_, r + format_.v_index, Plane(r, format_.v_scales));
    }
  }
  void Decode(const uint8_t* records, int64_t n, float* k, float* v) const override {
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* r = records + t * record_bytes();
      TurboDecodeKeysRow(r + format_.k_index, Plane(r, format_.k_scales), Plane(r, format_.k_zeros), row_,
                         k + t * width());
      TurboDecodeValuesRow(r + format_.v_index, Plane(r, format_.v_scales), row_, /*rotated=*/false,
                           v + t * width());
    }
  }
  void Attend(Ops& ops, const AttentionArgs& query, const EncodedKv& kv) const override {
    AttendRotated(ops, query, kv);
    RestoreValues(ops, query.out, query.num_queries * query.num_heads);
  }
  bool rotates_values() const override { return true; }
  void AttendRotated(Ops& ops, const AttentionArgs& query, const EncodedKv& kv) const override {
    ops.AttentionTurboKv(query, kv, format_);
  }
  void RestoreValues(Ops& ops, float* out, int64_t rows) const override {
    ops.UnrotateValues(out, rows, head_dim(), signs_);
  }

 private:
  static uint16_t* Plane(uint8_t* r, int64_t off) { return reinterpret_cast<uint16_t*>(r + off); }
  static const uint16_t* Plane(const uint8_t* r, int64_t off) { return reinterpret_cast<const uint16_t*>(r + off); }
  TurboRowFormat row_;
  TurboKvFormat format_;
  const float* signs_ = nullptr;
};

}  // namespace

std::string KvCodecSpec::signature() const {
  switch (kind) {
    case Kind::kPlain: return "kv:plain";
    case Kind::kAffine: return "kv:affine:" + std::to_string(bits) + ":" + std::to_string(group);
    case Kind::kTurbo: return "kv:turbo:k" + std::to_string(key_bits) + "v" + std::to_string(value_bits);
  }
  return "kv:?";
}

StatusOr<KvCodecSpec> KvCodecSpec::FromSignature(const std::string& s) {
  if (s == "kv:plain") return Plain();
  std::smatch m;
  static const std::regex kAffine("kv:affine:([0-9]{1,2}):([0-9]{1,4})");
  static const std::regex kTurbo("kv:turbo:k([0-9])v([0-9])");
  if (std::regex_match(s, m, kAffine)) return Affine(std::stoi(m[1]), std::stoi(m[2]));
  if (std::regex_match(s, m, kTurbo)) return Turbo(std::stoi(m[1]), std::stoi(m[2]));
  return InvalidArgument("[kv] unknown codec signature '" + s + "'");
}

StatusOr<std::shared_ptr<const KvCodec>> KvCodec::Make(const KvCodecSpec& spec, int num_kv_heads, int head_dim) {
  if (num_kv_heads <= 0 || head_dim <= 0 || head_dim % 32 != 0)
    return Unsupported("[kv] KV caches need head_dim a multiple of 32, got " + std::to_string(head_dim));
  switch (spec.kind) {
    case KvCodecSpec::Kind::kPlain:
      return std::shared_ptr<const KvCodec>(std::make_shared<PlainCodec>(num_kv_heads, head_dim));
    case KvCodecSpec::Kind::kAffine: {
      if (spec.bits != 4 && spec.bits != 8)
        return InvalidArgument("[kv] affine bits must be 4 or 8, not " + std::to_string(spec.bits));
      if (spec.group != 32 && spec.group != 64 && spec.group != 128)
        return InvalidArgument("[kv] affine group must be 32, 64 or 128, not " + std::to_string(spec.group));
      if (head_dim > 512) return Unsupported("[kv] affine KV needs head_dim <= 512");
      KvCodecSpec s = spec;
      while (head_dim % s.group != 0) s.group /= 2;  // 32 always divides
      return std::shared_ptr<const KvCodec>(std::make_shared<AffineCodec>(s, num_kv_heads, head_dim));
    }
    case KvCodecSpec::Kind::kTurbo: {
      G4_RETURN_IF_ERROR(ValidateTurboFormat({spec.key_bits, spec.value_bits, head_dim, num_kv_heads}));
      return std::shared_ptr<const KvCodec>(std::make_shared<TurboCodec>(spec, num_kv_heads, head_dim));
    }
  }
  return InvalidArgument("[kv] unknown codec kind");
}

void CodecKvView::Reset(const KvCodec* codec, const EncodedKv& kv) {
  codec_ = codec;
  kv_ = kv;
  if (const AffineKvFormat* f = codec->affine_format()) quantized_ = QuantizedKvView{kv, *f};
}

KvView CodecKvView::MakeView() const {
  KvView view;
  view.pos = kv_.pos;
  view.num_keys = kv_.num_keys;
  codec_->FillPlainPort(kv_, &view);
  view.attention = this;
  return view;
}

}  // namespace g4
