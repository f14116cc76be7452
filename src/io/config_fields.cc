// Typed JSON field reads for the config parsers (see config_internal.h).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/config_internal.h"

namespace g4::config_internal {

std::string FormatDouble(double v) {
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

Status FieldError(std::string_view module, std::string_view name, std::string_view problem, StatusCode code) {
  std::string m = "[";
  m += module;
  m += "] ";
  m += name;
  m += ": ";
  m += problem;
  return Status(code, std::move(m));
}

Status WithFilePath(const Status& s, std::string_view module, const std::string& path) {
  if (s.ok()) return s;
  std::string tag = "[";
  tag += module;
  tag += "] ";
  const std::string& m = s.message();
  if (m.compare(0, tag.size(), tag) == 0) return Status(s.code(), tag + path + ": " + m.substr(tag.size()));
  return Status(s.code(), tag + path + ": " + m);
}

std::string JoinPath(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

Status CheckRange(const FieldReader& r, std::string_view key, double v, DoubleRange range, std::string_view note) {
  if (v >= range.lo && v <= range.hi) return Status::Ok();
  return r.Error(key, FormatDouble(v) + " is outside the accepted range [" + FormatDouble(range.lo) + ", " +
                          FormatDouble(range.hi) + "]" + std::string(note));
}

namespace {

std::string RangeProblem(const std::string& value_text, bool below, int64_t lo, int64_t hi) {
  if (below) {
    if (lo == 1) return "must be positive, got " + value_text;
    if (lo == 0) return "must not be negative, got " + value_text;
    return "must be at least " + std::to_string(lo) + ", got " + value_text;
  }
  return value_text + " is too large (at most " + std::to_string(hi) + ")";
}

}  // namespace

StatusOr<int64_t> JsonToInt(const Json& v, std::string_view module, std::string_view name, int64_t lo,
                            int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return FieldError(module, name, RangeProblem(std::to_string(u), false, lo, hi));
    const int64_t i = static_cast<int64_t>(u);
    if (i < lo) return FieldError(module, name, RangeProblem(std::to_string(i), true, lo, hi));
    return i;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo) return FieldError(module, name, RangeProblem(std::to_string(i), true, lo, hi));
    if (i > hi) return FieldError(module, name, RangeProblem(std::to_string(i), false, lo, hi));
    return i;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      return FieldError(module, name, "expected an integer, got " + FormatDouble(d));
    }
    // Compare as doubles first: a cast of an out-of-range double is undefined.
    if (d < static_cast<double>(lo)) return FieldError(module, name, RangeProblem(FormatDouble(d), true, lo, hi));
    if (d > static_cast<double>(hi)) return FieldError(module, name, RangeProblem(FormatDouble(d), false, lo, hi));
    return static_cast<int64_t>(d);
  }
  return FieldError(module, name, std::string("expected an integer, got ") + v.type_name());
}

const Json* FieldReader::Find(std::string_view key) const {
  if (!obj_.is_object()) return nullptr;
  auto it = obj_.find(std::string(key));
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status FieldReader::Error(std::string_view key, std::string_view problem, StatusCode code) const {
  return FieldError(module_, Name(key), problem, code);
}

StatusOr<std::optional<int64_t>> FieldReader::Int(std::string_view key, int64_t lo, int64_t hi) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  G4_ASSIGN_OR_RETURN(int64_t i, JsonToInt(*v, module_, Name(key), lo, hi));
  return std::optional<int64_t>(i);
}

StatusOr<int64_t> FieldReader::RequiredInt(std::string_view key, int64_t lo, int64_t hi) const {
  G4_ASSIGN_OR_RETURN(std::optional<int64_t> v, Int(key, lo, hi));
  if (!v) return Error(key, "missing");
  return *v;
}

StatusOr<std::optional<double>> FieldReader::Double(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return Error(key, std::string("expected a number, got ") + v->type_name());
  const double d = v->get<double>();
  if (!std::isfinite(d)) return Error(key, "expected a finite number");
  return std::optional<double>(d);
}

StatusOr<std::optional<bool>> FieldReader::Bool(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return Error(key, std::string("expected true or false, got ") + v->type_name());
  return std::optional<bool>(v->get<bool>());
}

StatusOr<std::optional<std::string>> FieldReader::String(std::string_view key) const {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return Error(key, std::string("expected a string, got ") + v->type_name());
  return std::optional<std::string>(v->get<std::string>());
}

StatusOr<std::vector<int>> FieldReader::IntOrIntList(std::string_view key, int64_t lo, int64_t hi) const {
  std::vector<int> out;
  const Json* v = Find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) {
    if (!v->is_number()) return Error(key, std::string("expected an integer or a list of integers, got ") + v->type_name());
    G4_ASSIGN_OR_RETURN(int64_t i, JsonToInt(*v, module_, Name(key), lo, hi));
    out.push_back(static_cast<int>(i));
    return out;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string name = Name(key) + "[" + std::to_string(i) + "]";
    G4_ASSIGN_OR_RETURN(int64_t id, JsonToInt((*v)[i], module_, name, lo, hi));
    out.push_back(static_cast<int>(id));
  }
  return out;
}

}  // namespace g4::config_internal
