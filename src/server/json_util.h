// JSON helpers for request parsing and response writing (nlohmann::json).
// Nothing here throws: bodies are parsed without exceptions, fields are
// type-checked before they are read, and Dump replaces invalid UTF-8.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace g4::server {

// Objects keep their members in insertion order ("id" first, as the APIs
// print them).
using Json = nlohmann::ordered_json;

// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD.
std::string Dump(const Json& j);

// A request body: InvalidArgument when it is not JSON, not an object,
// nested deeper than kMaxJsonDepth, or repeats a key in one object
// (core/json.h).
StatusOr<Json> ParseObject(std::string_view body);

// The member `key` of object `obj`, or null when absent or JSON null.
const Json* Find(const Json& obj, const char* key);

// Typed optional fields. Absent or null: *out is left as it is. A value of
// the wrong type or outside [lo, hi]: InvalidArgument "'NAME' must be ...",
// NAME being `where` + key.
Status ReadString(const Json& obj, const char* key, std::optional<std::string>* out, const std::string& where = "");
Status ReadBool(const Json& obj, const char* key, std::optional<bool>* out, const std::string& where = "");
Status ReadInt(const Json& obj, const char* key, std::optional<int64_t>* out, int64_t lo, int64_t hi,
               const std::string& where = "");
Status ReadNumber(const Json& obj, const char* key, std::optional<double>* out, double lo, double hi,
                  const std::string& where = "");

// "Field 'x' must be ..." errors.
Status FieldError(const std::string& name, const std::string& what);

// A request asking for what g4 does not do: kUnsupported, "[request] what".
Status RefuseRequest(const std::string& what);

// Calls item(element, at) for each element of the JSON array `array`,
// named `name` ("tools", "messages[2].content"), in order; `at` is the
// element's name and a dot, ready for its fields ("tools[0]."). An element
// that is not an object is FieldError(its name, `not_object`); the first
// error ends the walk and is returned. REQUIRES: array.is_array().
Status ForEachObject(const Json& array, const std::string& name,
                     const std::function<Status(const Json& element, const std::string& at)>& item,
                     const std::string& not_object = "must be an object");

}  // namespace g4::server
