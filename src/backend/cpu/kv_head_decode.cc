// The per-codec head decoders of kv_head_decode.h. Every decoder reproduces
// DecodeKvRecords' arithmetic element for element (the same single
// roundings), so a kernel reads exactly the numbers the host reference
// decodes.
#include "backend/cpu/kv_head_decode.h"

#include "backend/cpu/isa.h"
#include "core/check.h"
#include "core/float16.h"

G4_CPU_BEGIN
namespace {

using kvdecode::LoadCodes32;
using kvdecode::LoadHalf;

const float* KeyPlainF32(const KvHeadDecoder& c, const uint8_t* rec, int kh, float*) {
  return reinterpret_cast<const float*>(rec + c.format.k_codes) + static_cast<int64_t>(kh) * c.head_dim;
}
const float* ValuePlainF32(const KvHeadDecoder& c, const uint8_t* rec, int kh, float*) {
  return reinterpret_cast<const float*>(rec + c.format.v_codes) + static_cast<int64_t>(kh) * c.head_dim;
}

// 16-bit plain storage: whole vectors with the SIMD widening, then the tail.
template <bool kBf16>
void Widen16(const uint8_t* p, int d, float* out) {
  int i = 0;
  for (; i + kLanes <= d; i += kLanes) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p + 2 * i);
    VStore(out + i, kBf16 ? VLoadBf16(h) : VLoadF16(h));
  }
  for (; i < d; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = kBf16 ? Bf16ToF32(h) : F16ToF32(h);
  }
}

template <bool kBf16>
const float* KeyPlain16(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf) {
  Widen16<kBf16>(rec + c.format.k_codes + 2 * static_cast<int64_t>(kh) * c.head_dim, c.head_dim, buf);
  return buf;
}
template <bool kBf16>
const float* ValuePlain16(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf) {
  Widen16<kBf16>(rec + c.format.v_codes + 2 * static_cast<int64_t>(kh) * c.head_dim, c.head_dim, buf);
  return buf;
}

// Affine: x = fma(code, step, bias), per group of c.group elements.
template <int B>
void AffineHead(const KvHeadDecoder& c, const uint8_t* rec, int64_t codes, int64_t scales, int64_t biases,
                int kh, float* out) {
  const int d = c.head_dim;
  const int64_t groups_per_head = d / c.group;
  const uint8_t* q = rec + codes + static_cast<int64_t>(kh) * d * B / 8;
  const uint8_t* s = rec + scales + 2 * kh * groups_per_head;
  const uint8_t* b = rec + biases + 2 * kh * groups_per_head;
  const int chunks_per_group = c.group / kChunk;
  VF v[kChunkVecs];
  for (int ch = 0; ch < d / kChunk; ++ch) {
    const int g = ch / chunks_per_group;
    const VF step = VSet1(LoadHalf(s + 2 * g)), bias = VSet1(LoadHalf(b + 2 * g));
    LoadCodes32<B>(q + ch * 4 * B, v);
    for (int i = 0; i < kChunkVecs; ++i) VStore(out + ch * kChunk + i * kLanes, VFma(v[i], step, bias));
  }
}

template <int B>
const float* KeyAffine(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf) {
  AffineHead<B>(c, rec, c.format.k_codes, c.format.k_scales, c.format.k_biases, kh, buf);
  return buf;
}
template <int B>
const float* ValueAffine(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf) {
  AffineHead<B>(c, rec, c.format.v_codes, c.format.v_scales, c.format.v_biases, kh, buf);
  return buf;
}

// Turbo keys: x = (i + z) s per group of 32 (i + z is an exact small integer,
// so the one rounding is the product's, as in TurboDecodeKeysRow).
template <int B>
const float* KeyTurbo(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf) {
  const int d = c.head_dim;
  const uint8_t* q = rec + c.format.k_codes + static_cast<int64_t>(kh) * d * B / 8;
  const uint8_t* s = rec + c.format.k_scales + 2 * static_cast<int64_t>(kh) * (d / kChunk);
  const uint8_t* z = rec + c.format.k_biases + 2 * static_cast<int64_t>(kh) * (d / kChunk);
  VF v[kChunkVecs];
  for (int ch = 0; ch < d / kChunk; ++ch) {
    const VF step = VSet1(LoadHalf(s + 2 * ch)), zero = VSet1(LoadHalf(z + 2 * ch));
    if constexpr (B == 8) {
      kvdecode::LoadI8x32(q + ch * kChunk, v);
    } else {
      LoadCodes32<B>(q + ch * 4 * B, v);
    }
    for (int i = 0; i < kChunkVecs; ++i) VStore(buf + ch * kChunk + i * kLanes, VMul(VAdd(v[i], zero), step));
  }
  return buf;
}

// Turbo values in the rotated domain: centroid[i] * rms per group of 32.
template <int B>
const float* ValueTurbo(const KvHeadDecoder& c, const uint8_t* rec, int kh, float* buf) {
  const int d = c.head_dim;
  const uint8_t* q = rec + c.format.v_codes + static_cast<int64_t>(kh) * d * B / 8;
  const uint8_t* r = rec + c.format.v_scales + 2 * static_cast<int64_t>(kh) * (d / kChunk);
  VF v[kChunkVecs];
  for (int ch = 0; ch < d / kChunk; ++ch) {
    const VF rms = VSet1(LoadHalf(r + 2 * ch));
    LoadCodes32<B>(q + ch * 4 * B, v);
    for (int i = 0; i < kChunkVecs; ++i)
      VStore(buf + ch * kChunk + i * kLanes, VMul(kvdecode::LookupCentroids<B>(v[i], c.centroids), rms));
  }
  return buf;
}

KvHeadDecodeFn TurboKeyFn(int bits) {
  switch (bits) {
    case 2:
      return KeyTurbo<2>;
    case 4:
      return KeyTurbo<4>;
    case 5:
      return KeyTurbo<5>;
    case 8:
      return KeyTurbo<8>;
  }
  return nullptr;
}

KvHeadDecodeFn TurboValueFn(int bits) {
  switch (bits) {
    case 2:
      return ValueTurbo<2>;
    case 3:
      return ValueTurbo<3>;
    case 4:
      return ValueTurbo<4>;
    case 5:
      return ValueTurbo<5>;
    case 8:
      return ValueTurbo<8>;
  }
  return nullptr;
}

}  // namespace

KvHeadDecoder MakeKvHeadDecoder(const KvRecordFormat& format, const float* value_centroids) {
  G4_CHECK_MSG(format.record_bytes > 0 && format.head_dim > 0 && format.num_kv_heads > 0,
               "[cpu] KV store without a record format");
  KvHeadDecoder c;
  c.format = format;
  c.head_dim = format.head_dim;
  const KvCodecSpec& spec = format.spec;
  switch (spec.kind) {
    case KvCodecSpec::Kind::kPlain:
      c.group = format.head_dim;
      if (spec.plain_dtype == DType::kF32) {
        G4_CHECK_MSG(format.record_bytes % 4 == 0 && format.v_codes % 4 == 0,
                     "[cpu] f32 KV records must be aligned");
        c.key = KeyPlainF32;
        c.value = ValuePlainF32;
      } else if (spec.plain_dtype == DType::kBF16) {
        c.key = KeyPlain16<true>;
        c.value = ValuePlain16<true>;
      } else {
        G4_CHECK_MSG(spec.plain_dtype == DType::kF16, "[cpu] plain KV dtype must be f32, bf16 or f16");
        c.key = KeyPlain16<false>;
        c.value = ValuePlain16<false>;
      }
      break;
    case KvCodecSpec::Kind::kAffine:
      G4_CHECK_MSG(spec.group % kChunk == 0 && format.head_dim % spec.group == 0, "[cpu] affine KV group");
      c.group = spec.group;
      c.key_bits = c.value_bits = spec.bits;
      if (spec.bits == 4) {
        c.key = KeyAffine<4>;
        c.value = ValueAffine<4>;
      } else {
        G4_CHECK_MSG(spec.bits == 8, "[cpu] affine KV bits must be 4 or 8");
        c.key = KeyAffine<8>;
        c.value = ValueAffine<8>;
      }
      break;
    case KvCodecSpec::Kind::kTurbo:
      G4_CHECK_MSG(format.head_dim % kChunk == 0, "[cpu] turbo KV head_dim must be whole groups of 32");
      c.key_bits = spec.key_bits;
      c.value_bits = spec.value_bits;
      c.rotated_values = true;
      G4_CHECK_MSG(value_centroids != nullptr, "[cpu] turbo KV store without its value codebook");
      c.centroids = value_centroids;
      c.key = TurboKeyFn(spec.key_bits);
      c.value = TurboValueFn(spec.value_bits);
      G4_CHECK_MSG(c.key && c.value, "[cpu] turbo KV bit widths");
      break;
  }
  if (spec.kind == KvCodecSpec::Kind::kPlain) {
    c.k_code_bytes = c.v_code_bytes = static_cast<int64_t>(format.head_dim) * DTypeSize(spec.plain_dtype);
  } else {
    c.k_code_bytes = static_cast<int64_t>(format.head_dim) * c.key_bits / 8;
    c.v_code_bytes = static_cast<int64_t>(format.head_dim) * c.value_bits / 8;
    c.scale_bytes = 2 * static_cast<int64_t>(format.head_dim / c.group);
  }
  return c;
}

G4_CPU_END
