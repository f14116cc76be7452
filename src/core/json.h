// Bounded JSON parsing into a DOM: the one way g4 turns JSON text from a
// file or a request into nlohmann values.
//
// nlohmann's own parse() builds the DOM without limits: 99 MB of '[' becomes
// gigabytes of nested arrays, and its parser callback (used to spot duplicate
// keys) rescans the parent object after every child, which is quadratic. This
// parser drives nlohmann's SAX interface (iterative, no recursion) and:
//  - stops at the first container nested deeper than `max_depth`;
//  - stops after `max_values` values, so the DOM stays bounded whatever the
//    text (one value is at most ~100 bytes plus its string);
//  - refuses a key repeated within one object (nlohmann keeps the last
//    silently, hiding the first);
//  - never throws (allocation failure included).
// Errors: "[module] label: ..." with code `error_code` (callers pick the code
// their module uses for bad files: kInvalidArgument for configs, kCorrupt for
// checkpoint files).
//
// Parsers that stream instead of building a DOM (safetensors headers, the
// vocab of tokenizer.json) keep their own SAX handlers and apply the same
// limits from core/limits.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/limits.h"
#include "core/status.h"

namespace g4 {

struct JsonLimits {
  int max_depth = kMaxJsonDepth;
  uint64_t max_values = kMaxJsonValues;
  bool reject_duplicate_keys = true;
};

// `module` is the tag without brackets ("config"); `label` names the source
// (a path, or "" for none).
template <typename Json>
StatusOr<Json> ParseJsonBounded(std::string_view text, std::string_view module, std::string_view label,
                                StatusCode error_code = StatusCode::kInvalidArgument, const JsonLimits& limits = {});

extern template StatusOr<nlohmann::json> ParseJsonBounded<nlohmann::json>(std::string_view, std::string_view,
                                                                          std::string_view, StatusCode,
                                                                          const JsonLimits&);
extern template StatusOr<nlohmann::ordered_json> ParseJsonBounded<nlohmann::ordered_json>(
    std::string_view, std::string_view, std::string_view, StatusCode, const JsonLimits&);

// The readable part of a nlohmann exception message: "[json.exception.parse_error.101]
// parse error at line 1, column 3: ..." loses its bracketed id.
std::string JsonErrorText(const std::exception& e);

}  // namespace g4
