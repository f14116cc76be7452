#include "kv/kv_scheme.h"

#include <algorithm>
#include <regex>

namespace g4 {
namespace {

const char kSyntax[] =
    "expected plain[:f32|:bf16|:f16], affine:BITS[:GROUP], turbo[:kKBvVB], each optionally @N, or "
    "full=PART,sliding=PART";

StatusOr<LayerKvSpec> ParsePart(const std::string& text) {
  static const std::regex kPart(
      R"((plain(?::(f32|bf16|f16))?|affine:([0-9]{1,2})(?::([0-9]{1,4}))?|turbo(?::k([0-9])v([0-9]))?)(?:@([0-9]{1,9}))?)");
  std::smatch m;
  if (!std::regex_match(text, m, kPart)) return InvalidArgument("[kv] bad KV spec '" + text + "': " + kSyntax);
  LayerKvSpec spec;
  const std::string head = m[1].str();
  if (head.rfind("plain", 0) == 0) {
    const std::string dtype = m[2].matched ? m[2].str() : "f32";
    spec.codec = KvCodecSpec::Plain(dtype == "bf16" ? DType::kBF16 : dtype == "f16" ? DType::kF16 : DType::kF32);
  } else if (head.rfind("affine", 0) == 0) {
    spec.codec = KvCodecSpec::Affine(std::stoi(m[3]), m[4].matched ? std::stoi(m[4]) : 64);
    if (spec.codec.bits != 4 && spec.codec.bits != 8)
      return InvalidArgument("[kv] bad KV spec '" + text + "': affine bits must be 4 or 8");
    if (spec.codec.group != 32 && spec.codec.group != 64 && spec.codec.group != 128)
      return InvalidArgument("[kv] bad KV spec '" + text + "': affine group must be 32, 64 or 128");
  } else if (head.rfind("turbo", 0) == 0) {
    spec.codec = m[5].matched ? KvCodecSpec::Turbo(std::stoi(m[5]), std::stoi(m[6])) : KvCodecSpec::Turbo(8, 3);
    const int kb = spec.codec.key_bits, vb = spec.codec.value_bits;
    if (kb != 2 && kb != 4 && kb != 5 && kb != 8)
      return InvalidArgument("[kv] bad KV spec '" + text + "': turbo key bits must be 2, 4, 5 or 8");
    if (vb != 2 && vb != 3 && vb != 4 && vb != 5 && vb != 8)
      return InvalidArgument("[kv] bad KV spec '" + text + "': turbo value bits must be 2, 3, 4, 5 or 8");
  }
  if (m[7].matched) spec.delay = std::stoll(m[7]);
  // The delayed phase is plain f32: plain f32 has nothing to convert to
  // (plain:bf16@N and plain:f16@N do convert).
  if (spec.codec == KvCodecSpec::Plain(DType::kF32)) spec.delay = -1;
  return spec;
}

}  // namespace

std::string LayerKvSpec::signature() const {
  std::string s = codec.signature();
  if (delayed()) {
    s += '@';
    s += std::to_string(delay);
  }
  return s;
}

std::string KvScheme::signature() const {
  return "full=" + full.signature() + ",sliding=" + (sliding_ring ? "" : "unbounded+") + sliding.signature();
}

StatusOr<KvScheme> KvScheme::Parse(const std::string& spec) {
  KvScheme scheme;
  if (spec.find('=') == std::string::npos) {
    G4_ASSIGN_OR_RETURN(LayerKvSpec part, ParsePart(spec));
    scheme.full = part;
    if (part.codec.kind != KvCodecSpec::Kind::kTurbo) scheme.sliding = part;
    return scheme;
  }
  bool seen_full = false, seen_sliding = false;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, end - begin);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgument("[kv] bad KV spec '" + spec + "': " + kSyntax);
    const std::string type = item.substr(0, eq);
    G4_ASSIGN_OR_RETURN(LayerKvSpec part, ParsePart(item.substr(eq + 1)));
    if (type == "full" && !seen_full) {
      scheme.full = part;
      seen_full = true;
    } else if (type == "sliding" && !seen_sliding) {
      scheme.sliding = part;
      seen_sliding = true;
    } else {
      return InvalidArgument("[kv] bad KV spec '" + spec + "': layer type '" + type +
                             "' unknown or repeated (full, sliding)");
    }
    begin = end + 1;
  }
  return scheme;
}

}  // namespace g4
