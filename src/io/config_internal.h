// Internal to the config parser (config*.cc): typed reads of JSON fields with
// errors that name the field, plus the pieces of config.json parsing that
// live in separate files. Nothing outside src/io/config*.cc includes this.
//
// Every read treats an absent key and a JSON null alike: HF serializes unset
// optional fields as null. No function here copies or dumps a JSON subtree,
// since both recurse and a hostile file can nest arbitrarily deep.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "io/config.h"

namespace g4::config_internal {

using Json = nlohmann::json;

// Reads fields of one JSON object. Errors read "[module] <prefix><key>: ...",
// e.g. "[config] rope_parameters.full_attention.rope_theta: missing".
class FieldReader {
 public:
  // `obj` must outlive the reader. A non-object reads as empty.
  FieldReader(const Json& obj, std::string module, std::string prefix = "")
      : obj_(obj), module_(std::move(module)), prefix_(std::move(prefix)) {}

  // The value under `key`, or nullptr when absent or null.
  const Json* Find(std::string_view key) const;
  std::string Name(std::string_view key) const { return prefix_ + std::string(key); }
  Status Error(std::string_view key, std::string_view problem,
               StatusCode code = StatusCode::kInvalidArgument) const;

  // Integers must be JSON integers (or floats with an integral value) within
  // [lo, hi]; the bound keeps every derived product far from overflow.
  StatusOr<std::optional<int64_t>> Int(std::string_view key, int64_t lo, int64_t hi) const;
  StatusOr<int64_t> RequiredInt(std::string_view key, int64_t lo, int64_t hi) const;
  // Any finite JSON number.
  StatusOr<std::optional<double>> Double(std::string_view key) const;
  StatusOr<std::optional<bool>> Bool(std::string_view key) const;
  StatusOr<std::optional<std::string>> String(std::string_view key) const;
  // An integer or a list of integers (eos_token_id); absent gives an empty list.
  StatusOr<std::vector<int>> IntOrIntList(std::string_view key, int64_t lo, int64_t hi) const;

  const std::string& module() const { return module_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const Json& obj_;
  std::string module_;
  std::string prefix_;
};

// Accepted ranges for float fields where a value that passes the sign check
// can still only produce NaN or constant logits (rope_theta 1e-308 makes the
// inverse frequencies overflow, rms_norm_eps 1e308 zeroes every normed
// activation, final_logit_softcapping 1e-300 flattens the logits). Each range
// is orders of magnitude wider than any released Gemma config; they are
// listed in docs/reliability.md.
struct DoubleRange {
  double lo, hi;
};
inline constexpr DoubleRange kRopeThetaRange{1.0, 1e12};       // released: 1e4 (sliding), 1e6 (full)
inline constexpr DoubleRange kRopeFactorRange{1e-3, 1e6};      // released: 1 (or 8 for long context)
inline constexpr DoubleRange kRmsNormEpsRange{1e-12, 0.1};     // released: 1e-6
inline constexpr DoubleRange kSoftcapRange{1.0, 1e6};          // released: 30; 0 means none
inline constexpr DoubleRange kTemperatureRange{1e-3, 100.0};   // 0 also accepted (greedy)
inline constexpr DoubleRange kRepetitionPenaltyRange{1e-2, 100.0};

// "<key>: <v> is outside the accepted range [lo, hi]<note>" unless v is in range.
Status CheckRange(const FieldReader& r, std::string_view key, double v, DoubleRange range,
                  std::string_view note = "");

// Converts `v` (already known non-null) to an integer in [lo, hi]; errors name
// `name` under `module`.
StatusOr<int64_t> JsonToInt(const Json& v, std::string_view module, std::string_view name, int64_t lo,
                            int64_t hi);
// Shortest round-trip text of a double for messages ("1e-06", "0.25").
std::string FormatDouble(double v);
// "[module] name: problem" with the given code.
Status FieldError(std::string_view module, std::string_view name, std::string_view problem,
                  StatusCode code = StatusCode::kInvalidArgument);
// Puts the file path after the module tag: "[config] DIR/config.json: ...".
Status WithFilePath(const Status& s, std::string_view module, const std::string& path);
// DIR/name, tolerating an empty DIR or a trailing slash.
std::string JoinPath(const std::string& dir, std::string_view name);

// config_layers.cc: layer_types (or the pattern that replaces it), rope
// parameters per layer type, per-layer geometry from per_layer_config or the
// global_* fields, KV sharing and donors, MLP widths. Needs the scalar fields
// of `cfg` already read.
Status ParseLayerTypes(const FieldReader& text, Gemma4Config& cfg);
Status ParseRope(const FieldReader& text, Gemma4Config& cfg);
Status DeriveLayerGeometry(const FieldReader& text, Gemma4Config& cfg);

// config_quant.cc: the MLX `quantization` (or `quantization_config`) block,
// looked for at the top level first, then in the text config.
Status ParseQuantization(const FieldReader& top, const FieldReader* text, QuantizationConfig& out);

}  // namespace g4::config_internal
