// KV records (kv_record.h): codec names, plane layout per geometry, and the
// host reference encoder/decoder that every backend's KV ops are tested
// against. The per-row numbers live in kv_affine_codec.cc and
// kv_turbo_codec.cc; this file only places rows into records.
#include "backend/kv_record.h"

#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include "backend/kv_affine_codec.h"
#include "backend/kv_turbo_codec.h"
#include "backend/lloyd_max.h"
#include "core/check.h"
#include "core/float16.h"

namespace g4 {
namespace {

// Parses a whole decimal integer (no sign, at most 4 digits); false otherwise.
bool ParseSmallInt(std::string_view s, int* out) {
  if (s.empty() || s.size() > 4) return false;
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string Geometry(int num_kv_heads, int head_dim) {
  return std::to_string(num_kv_heads) + " KV heads of head_dim " + std::to_string(head_dim);
}

AffineRowFormat AffineRow(const KvRecordFormat& f) { return {f.spec.bits, f.spec.group, f.width()}; }
TurboRowFormat TurboRow(const KvRecordFormat& f) {
  return {f.spec.key_bits, f.spec.value_bits, f.head_dim, f.num_kv_heads};
}

uint16_t* Plane16(uint8_t* record, int64_t offset) { return reinterpret_cast<uint16_t*>(record + offset); }
const uint16_t* Plane16(const uint8_t* record, int64_t offset) {
  return reinterpret_cast<const uint16_t*>(record + offset);
}

// One row of plain storage: f32 copies bytes, bf16/f16 round to nearest even.
void StorePlain(DType t, const float* x, int64_t n, uint8_t* out) {
  if (t == DType::kF32) {
    std::memcpy(out, x, n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = t == DType::kBF16 ? F32ToBf16(x[i]) : F32ToF16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void LoadPlain(DType t, const uint8_t* in, int64_t n, float* x) {
  if (t == DType::kF32) {
    std::memcpy(x, in, n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    x[i] = t == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
  }
}

}  // namespace

std::string KvCodecSpec::signature() const {
  switch (kind) {
    case Kind::kPlain:
      if (plain_dtype == DType::kBF16) return "kv:plain:bf16";
      if (plain_dtype == DType::kF16) return "kv:plain:f16";
      return "kv:plain";
    case Kind::kAffine:
      return "kv:affine:" + std::to_string(bits) + ":" + std::to_string(group);
    case Kind::kTurbo:
      return "kv:turbo:k" + std::to_string(key_bits) + "v" + std::to_string(value_bits);
  }
  return "kv:?";
}

StatusOr<KvCodecSpec> KvCodecSpec::FromSignature(const std::string& signature) {
  const std::string_view s = signature;
  if (s == "kv:plain") return Plain(DType::kF32);
  if (s == "kv:plain:bf16") return Plain(DType::kBF16);
  if (s == "kv:plain:f16") return Plain(DType::kF16);
  if (StartsWith(s, "kv:affine:")) {
    const std::string_view rest = s.substr(10);
    const size_t colon = rest.find(':');
    int bits = 0, group = 0;
    if (colon != std::string_view::npos && ParseSmallInt(rest.substr(0, colon), &bits) &&
        ParseSmallInt(rest.substr(colon + 1), &group))
      return Affine(bits, group);
  }
  if (StartsWith(s, "kv:turbo:k")) {
    const std::string_view rest = s.substr(10);
    const size_t v = rest.find('v');
    int key_bits = 0, value_bits = 0;
    if (v != std::string_view::npos && ParseSmallInt(rest.substr(0, v), &key_bits) &&
        ParseSmallInt(rest.substr(v + 1), &value_bits))
      return Turbo(key_bits, value_bits);
  }
  return InvalidArgument("[kv] unknown codec signature '" + signature + "'");
}

StatusOr<KvRecordFormat> KvRecordFormat::Make(const KvCodecSpec& spec, int num_kv_heads, int head_dim) {
  if (num_kv_heads <= 0 || head_dim <= 0)
    return InvalidArgument("[kv] " + spec.signature() + ": bad geometry, " + Geometry(num_kv_heads, head_dim));
  KvRecordFormat f;
  f.spec = spec;
  f.num_kv_heads = num_kv_heads;
  f.head_dim = head_dim;
  const int64_t w = f.width();
  switch (spec.kind) {
    case KvCodecSpec::Kind::kPlain: {
      if (spec.plain_dtype != DType::kF32 && spec.plain_dtype != DType::kBF16 && spec.plain_dtype != DType::kF16)
        return InvalidArgument("[kv] plain KV storage must be f32, bf16 or f16");
      // Normalize the fields plain does not use, so equal formats compare equal.
      f.spec = KvCodecSpec::Plain(spec.plain_dtype);
      const int64_t row = w * static_cast<int64_t>(DTypeSize(spec.plain_dtype));
      f.k_codes = 0;
      f.v_codes = row;
      f.record_bytes = 2 * row;
      return f;
    }
    case KvCodecSpec::Kind::kAffine: {
      if (spec.bits != 4 && spec.bits != 8)
        return InvalidArgument("[kv] affine bits must be 4 or 8, not " + std::to_string(spec.bits));
      if (spec.group != 32 && spec.group != 64 && spec.group != 128)
        return InvalidArgument("[kv] affine group must be 32, 64 or 128, not " + std::to_string(spec.group));
      f.spec = KvCodecSpec::Affine(spec.bits, spec.group);
      // Groups never span heads: a group wider than a head shrinks to the
      // head when the head is itself a valid group size.
      if (spec.group > head_dim && (head_dim == 32 || head_dim == 64 || head_dim == 128)) f.spec.group = head_dim;
      if (head_dim % f.spec.group != 0)
        return Unsupported("[kv] " + spec.signature() + " needs head_dim a multiple of its group " +
                           std::to_string(spec.group) + "; this model has head_dim " + std::to_string(head_dim) +
                           " (use a smaller group or kv:plain)");
      const AffineRowFormat row = AffineRow(f);
      f.k_codes = 0;
      f.k_scales = row.code_bytes();
      f.k_biases = f.k_scales + 2 * row.groups();
      f.v_codes = row.bytes();
      f.v_scales = f.v_codes + row.code_bytes();
      f.v_biases = f.v_scales + 2 * row.groups();
      f.record_bytes = 2 * row.bytes();
      return f;
    }
    case KvCodecSpec::Kind::kTurbo: {
      f.spec = KvCodecSpec::Turbo(spec.key_bits, spec.value_bits);
      const TurboRowFormat row = TurboRow(f);
      const Status valid = ValidateTurboFormat(row);
      if (!valid.ok()) return Status(valid.code(), valid.message() + " (" + spec.signature() + ")");
      f.k_codes = 0;
      f.k_scales = row.key_index_bytes();
      f.k_biases = f.k_scales + 2 * row.groups();
      f.v_codes = f.k_biases + 2 * row.groups();
      f.v_scales = f.v_codes + row.value_index_bytes();
      f.v_biases = 0;
      f.record_bytes = row.bytes();
      G4_CHECK(f.v_scales + 2 * row.groups() == f.record_bytes);
      return f;
    }
  }
  return InvalidArgument("[kv] unknown codec kind");
}

void EncodeKvRecords(const KvRecordFormat& f, const float* k, const float* v, int64_t n, uint8_t* records) {
  G4_CHECK(f.record_bytes > 0 && n >= 0);
  const int64_t w = f.width();
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* r = records + t * f.record_bytes;
    const float* kt = k + t * w;
    const float* vt = v + t * w;
    switch (f.spec.kind) {
      case KvCodecSpec::Kind::kPlain:
        StorePlain(f.spec.plain_dtype, kt, w, r + f.k_codes);
        StorePlain(f.spec.plain_dtype, vt, w, r + f.v_codes);
        break;
      case KvCodecSpec::Kind::kAffine: {
        const AffineRowFormat row = AffineRow(f);
        AffineQuantizeRow(kt, row, r + f.k_codes, Plane16(r, f.k_scales), Plane16(r, f.k_biases));
        AffineQuantizeRow(vt, row, r + f.v_codes, Plane16(r, f.v_scales), Plane16(r, f.v_biases));
        break;
      }
      case KvCodecSpec::Kind::kTurbo: {
        const TurboRowFormat row = TurboRow(f);
        TurboEncodeKeysRow(kt, row, r + f.k_codes, Plane16(r, f.k_scales), Plane16(r, f.k_biases));
        TurboEncodeValuesRow(vt, row, r + f.v_codes, Plane16(r, f.v_scales));
        break;
      }
    }
  }
}

void DecodeKvRecords(const KvRecordFormat& f, const uint8_t* records, int64_t n, float* k, float* v,
                     bool rotated_values) {
  G4_CHECK(f.record_bytes > 0 && n >= 0);
  const int64_t w = f.width();
  for (int64_t t = 0; t < n; ++t) {
    const uint8_t* r = records + t * f.record_bytes;
    float* kt = k + t * w;
    float* vt = v + t * w;
    switch (f.spec.kind) {
      case KvCodecSpec::Kind::kPlain:
        LoadPlain(f.spec.plain_dtype, r + f.k_codes, w, kt);
        LoadPlain(f.spec.plain_dtype, r + f.v_codes, w, vt);
        break;
      case KvCodecSpec::Kind::kAffine: {
        const AffineRowFormat row = AffineRow(f);
        AffineDequantizeRow(r + f.k_codes, Plane16(r, f.k_scales), Plane16(r, f.k_biases), row, kt);
        AffineDequantizeRow(r + f.v_codes, Plane16(r, f.v_scales), Plane16(r, f.v_biases), row, vt);
        break;
      }
      case KvCodecSpec::Kind::kTurbo: {
        const TurboRowFormat row = TurboRow(f);
        TurboDecodeKeysRow(r + f.k_codes, Plane16(r, f.k_scales), Plane16(r, f.k_biases), row, kt);
        TurboDecodeValuesRow(r + f.v_codes, Plane16(r, f.v_scales), row, rotated_values, vt);
        break;
      }
    }
  }
}

const float* TurboValueCentroids(int value_bits) {
  const LloydMaxCodebook* book = FindLloydMaxCodebook(value_bits);
  G4_CHECK_MSG(book != nullptr, "[kv] no Lloyd-Max codebook for this value width");
  return book->centroids;
}

}  // namespace g4
