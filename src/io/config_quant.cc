// The MLX `quantization` block of config.json (spec section 4.3): default
// bits / group size / mode plus per-module overrides, where an override is
// either its own {bits, group_size[, mode]} or `false` (left unquantized).
#include <string>

#include "io/config_internal.h"

namespace g4 {

const QuantSpec* QuantizationConfig::Override(std::string_view module_path) const {
  auto it = overrides.find(std::string(module_path));
  if (it != overrides.end()) return &it->second;
  // Callers holding a tensor name may pass "X.weight"; overrides are keyed by X.
  constexpr std::string_view kSuffix = ".weight";
  if (module_path.size() > kSuffix.size() && module_path.substr(module_path.size() - kSuffix.size()) == kSuffix) {
    it = overrides.find(std::string(module_path.substr(0, module_path.size() - kSuffix.size())));
    if (it != overrides.end()) return &it->second;
  }
  return nullptr;
}

namespace config_internal {
namespace {

bool IsReservedKey(const std::string& key) {
  return key == "group_size" || key == "bits" || key == "mode" || key == "quant_method";
}

// Reads {bits, group_size, mode} from `r`; missing fields come from `inherit`
// (overrides) or are an error (the defaults, inherit == nullptr).
StatusOr<QuantSpec> ParseSpec(const FieldReader& r, const QuantSpec* inherit) {
  QuantSpec spec;
  spec.quantized = true;
  G4_ASSIGN_OR_RETURN(std::optional<std::string> mode, r.String("mode"));
  spec.mode = mode.value_or(inherit != nullptr ? inherit->mode : "affine");
  if (spec.mode != "affine") {
    return r.Error("mode", "'" + spec.mode + "' is not supported (only affine)", StatusCode::kUnsupported);
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> bits, r.Int("bits", 1, 64));
  if (!bits && inherit == nullptr) return r.Error("bits", "missing");
  spec.bits = static_cast<int>(bits.value_or(inherit != nullptr ? inherit->bits : 0));
  if (spec.bits != 2 && spec.bits != 3 && spec.bits != 4 && spec.bits != 5 && spec.bits != 6 && spec.bits != 8) {
    return r.Error("bits", std::to_string(spec.bits) + " is not supported (expected 2, 3, 4, 5, 6 or 8)");
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> group, r.Int("group_size", 1, 1 << 20));
  if (!group && inherit == nullptr) return r.Error("group_size", "missing");
  spec.group_size = static_cast<int>(group.value_or(inherit != nullptr ? inherit->group_size : 0));
  if (spec.group_size != 32 && spec.group_size != 64 && spec.group_size != 128) {
    return r.Error("group_size", std::to_string(spec.group_size) + " is not supported (expected 32, 64 or 128)");
  }
  return spec;
}

std::string Describe(const QuantSpec& q) {
  if (!q.quantized) return "not quantized";
  return std::to_string(q.bits) + "-bit group " + std::to_string(q.group_size) + " " + q.mode;
}

bool SameSpec(const QuantSpec& a, const QuantSpec& b) {
  if (a.quantized != b.quantized) return false;
  return !a.quantized || (a.bits == b.bits && a.group_size == b.group_size && a.mode == b.mode);
}

// The first difference between two parsed blocks, "" when they agree.
std::string Difference(const QuantizationConfig& a, const QuantizationConfig& b) {
  if (!SameSpec(a.defaults, b.defaults))
    return "defaults " + Describe(b.defaults) + " vs " + Describe(a.defaults);
  for (const auto& [module, spec] : b.overrides) {
    auto it = a.overrides.find(module);
    if (it == a.overrides.end()) return "'" + module + "' is overridden only here";
    if (!SameSpec(it->second, spec)) return "'" + module + "' is " + Describe(spec) + " vs " + Describe(it->second);
  }
  for (const auto& [module, spec] : a.overrides) {
    if (!b.overrides.count(module)) return "'" + module + "' is not overridden here";
  }
  return "";
}

Status ParseBlock(const Json& block, const std::string& name, QuantizationConfig& out) {
  if (!block.is_object()) {
    return FieldError("config", name, std::string("expected an object, got ") + block.type_name());
  }
  const FieldReader q(block, "config", name + ".");
  // HF-style quantization_config blocks (gptq, awq, fp8, ...) name their method.
  G4_ASSIGN_OR_RETURN(std::optional<std::string> method, q.String("quant_method"));
  if (method && *method != "mlx" && *method != "affine") {
    return q.Error("quant_method", "'" + *method + "' is not supported (only MLX affine quantization)",
                   StatusCode::kUnsupported);
  }
  QuantizationConfig result;
  result.present = true;
  G4_ASSIGN_OR_RETURN(result.defaults, ParseSpec(q, nullptr));
  for (auto it = block.begin(); it != block.end(); ++it) {
    const std::string& key = it.key();
    if (IsReservedKey(key)) continue;
    const Json& v = it.value();
    if (v.is_boolean()) {
      QuantSpec spec;
      if (v.get<bool>()) spec = result.defaults;  // `true`: quantized with the defaults
      result.overrides[key] = spec;
    } else if (v.is_object()) {
      G4_ASSIGN_OR_RETURN(QuantSpec spec, ParseSpec(FieldReader(v, "config", name + "." + key + "."), &result.defaults));
      result.overrides[key] = spec;
    } else if (key.find('.') != std::string::npos) {
      // A module path with a value that is no override ("x", 4, [..]):
      // ignoring it would quantize the module with the defaults.
      return FieldError("config", name + "." + key,
                        std::string("expected false, true or {bits, group_size[, mode]}, got ") + v.type_name());
    }
    // Other dot-free keys with scalar values are tool metadata, not modules.
  }
  out = std::move(result);
  return Status::Ok();
}

}  // namespace

Status ParseQuantization(const FieldReader& top, const FieldReader* text, QuantizationConfig& out) {
  out = QuantizationConfig{};
  // MLX writes the same dict twice (`quantization`, which MLX-LM reads, and
  // `quantization_config`, for HF tools); the first found is used and every
  // other block must say the same, or the file is ambiguous.
  std::string used;
  for (const FieldReader* reader : {&top, text}) {
    if (reader == nullptr) continue;
    for (const char* key : {"quantization", "quantization_config"}) {
      const Json* block = reader->Find(key);
      if (block == nullptr) continue;
      const std::string name = (reader == &top ? "" : "text_config.") + std::string(key);
      QuantizationConfig parsed;
      G4_RETURN_IF_ERROR(ParseBlock(*block, name, parsed));
      if (used.empty()) {
        out = std::move(parsed);
        used = name;
        continue;
      }
      const std::string diff = Difference(out, parsed);
      if (!diff.empty()) return FieldError("config", name, "disagrees with " + used + ": " + diff);
    }
  }
  return Status::Ok();
}

}  // namespace config_internal
}  // namespace g4
