#include "server/json_util.h"

#include <cmath>

#include "core/json.h"

namespace g4::server {

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

StatusOr<Json> ParseObject(std::string_view body) {
  if (body.empty()) return InvalidArgument("[request] the body is empty; send a JSON object");
  // Bounded (core/json.h): depth, value count and repeated keys are refused
  // while parsing, never by recursion.
  auto j = ParseJsonBounded<Json>(body, "request", "body");
  if (!j.ok()) return j.status();
  if (!j->is_object()) return InvalidArgument("[request] the body must be a JSON object");
  return j;
}

const Json* Find(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status FieldError(const std::string& name, const std::string& what) {
  return InvalidArgument("[request] '" + name + "' " + what);
}

Status RefuseRequest(const std::string& what) { return Unsupported("[request] " + what); }

Status ForEachObject(const Json& array, const std::string& name,
                     const std::function<Status(const Json& element, const std::string& at)>& item,
                     const std::string& not_object) {
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string element = name + "[" + std::to_string(i) + "]";
    if (!array[i].is_object()) return FieldError(element, not_object);
    G4_RETURN_IF_ERROR(item(array[i], element + "."));
  }
  return Status::Ok();
}

Status ReadString(const Json& obj, const char* key, std::optional<std::string>* out, const std::string& where) {
  const Json* v = Find(obj, key);
  if (!v) return Status::Ok();
  if (!v->is_string()) return FieldError(where + key, "must be a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status ReadBool(const Json& obj, const char* key, std::optional<bool>* out, const std::string& where) {
  const Json* v = Find(obj, key);
  if (!v) return Status::Ok();
  if (!v->is_boolean()) return FieldError(where + key, "must be true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status ReadInt(const Json& obj, const char* key, std::optional<int64_t>* out, int64_t lo, int64_t hi,
               const std::string& where) {
  const Json* v = Find(obj, key);
  if (!v) return Status::Ok();
  const std::string range = "between " + std::to_string(lo) + " and " + std::to_string(hi);
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return FieldError(where + key, "must be an integer " + range);
    x = v->get<int64_t>();
  } else if (v->is_number_float()) {  // 100.0 is an integer too
    const double d = v->get<double>();
    if (!(d == std::floor(d)) || !(std::fabs(d) < 9e18)) return FieldError(where + key, "must be an integer " + range);
    x = static_cast<int64_t>(d);
  } else {
    return FieldError(where + key, "must be an integer " + range);
  }
  if (x < lo || x > hi) return FieldError(where + key, "must be an integer " + range);
  *out = x;
  return Status::Ok();
}

Status ReadNumber(const Json& obj, const char* key, std::optional<double>* out, double lo, double hi,
                  const std::string& where) {
  const Json* v = Find(obj, key);
  if (!v) return Status::Ok();
  auto fmt = [](double d) {
    std::string s = std::to_string(d);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  const std::string range = "must be a number between " + fmt(lo) + " and " + fmt(hi);
  if (!v->is_number()) return FieldError(where + key, range);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) return FieldError(where + key, range);
  *out = d;
  return Status::Ok();
}

}  // namespace g4::server
