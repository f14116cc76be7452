// generation_config.json: stop tokens and sampling defaults (all optional).
#include <climits>
#include <exception>
#include <new>

#include "core/file_read.h"
#include "core/json.h"
#include "core/limits.h"
#include "io/config.h"
#include "io/config_internal.h"

namespace g4 {
namespace {

using config_internal::FieldReader;
using config_internal::FormatDouble;
using config_internal::Json;

constexpr const char* kModule = "generation_config";

// Reads an optional number; `valid` says whether a present value is allowed
// and `rule` words the requirement for the error.
template <typename Valid>
Status ReadChecked(const FieldReader& f, std::string_view key, Valid valid, const char* rule,
                   std::optional<double>& out) {
  G4_ASSIGN_OR_RETURN(out, f.Double(key));
  if (out && !valid(*out)) return f.Error(key, std::string(rule) + ", got " + FormatDouble(*out));
  return Status::Ok();
}

StatusOr<GenerationConfig> ParseGenerationImpl(std::string_view json_text) {
  G4_ASSIGN_OR_RETURN(Json root, ParseJsonBounded<Json>(json_text, kModule, ""));
  if (!root.is_object()) {
    return InvalidArgument(std::string("[generation_config] expected a JSON object at the top level, got ") +
                           root.type_name());
  }
  const FieldReader f(root, kModule);
  GenerationConfig g;
  g.present = true;
  G4_ASSIGN_OR_RETURN(g.eos_token_ids, f.IntOrIntList("eos_token_id", 0, INT_MAX));
  auto non_negative = [](double v) { return v >= 0; };
  auto unit = [](double v) { return v >= 0 && v <= 1; };
  auto positive = [](double v) { return v > 0; };
  G4_RETURN_IF_ERROR(ReadChecked(f, "temperature", non_negative, "must not be negative", g.temperature));
  if (g.temperature && *g.temperature != 0) {
    G4_RETURN_IF_ERROR(config_internal::CheckRange(f, "temperature", *g.temperature,
                                                   config_internal::kTemperatureRange, " (or 0 for greedy)"));
  }
  G4_RETURN_IF_ERROR(ReadChecked(f, "top_p", unit, "must be in [0, 1]", g.top_p));
  G4_RETURN_IF_ERROR(ReadChecked(f, "min_p", unit, "must be in [0, 1]", g.min_p));
  G4_RETURN_IF_ERROR(ReadChecked(f, "repetition_penalty", positive, "must be positive", g.repetition_penalty));
  if (g.repetition_penalty) {
    G4_RETURN_IF_ERROR(config_internal::CheckRange(f, "repetition_penalty", *g.repetition_penalty,
                                                   config_internal::kRepetitionPenaltyRange));
  }
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, f.Int("top_k", 0, INT_MAX));
  if (top_k) g.top_k = static_cast<int>(*top_k);
  G4_ASSIGN_OR_RETURN(g.do_sample, f.Bool("do_sample"));
  return g;
}

}  // namespace

StatusOr<GenerationConfig> ParseGenerationConfig(std::string_view json_text) {
  try {
    return ParseGenerationImpl(json_text);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("[generation_config] out of memory while parsing");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("[generation_config] ") + e.what());
  }
}

StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& dir) {
  const std::string path = config_internal::JoinPath(dir, "generation_config.json");
  StatusOr<std::string> text = ReadFileToString(path, kMaxConfigBytes, "kMaxConfigBytes");
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return GenerationConfig{};
    return Status(text.status().code(), "[generation_config] " + text.status().message());
  }
  StatusOr<GenerationConfig> g = ParseGenerationConfig(*text);
  if (!g.ok()) return config_internal::WithFilePath(g.status(), kModule, path);
  return g;
}

}  // namespace g4
