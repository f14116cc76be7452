#include "server/api_error.h"

#include "server/json_util.h"

namespace g4::server {

ApiError ApiError::FromStatus(const Status& status) {
  std::string m = status.message();
  if (m.size() > 2 && m[0] == '[') {
    const size_t close = m.find("] ");
    if (close != std::string::npos && close < 24) m = m.substr(close + 2);
  }
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported:
    case StatusCode::kResourceExhausted: return {400, m, ""};
    case StatusCode::kNotFound: return {404, m, ""};
    default: return {500, m, ""};
  }
}

std::string OpenAiErrorType(int s) {
  switch (s) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return s >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string AnthropicErrorType(int s) {
  switch (s) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return s >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string ErrorBody(const ApiError& e, ApiFlavor flavor) {
  Json j;
  if (flavor == ApiFlavor::kAnthropic) {
    j = {{"type", "error"}, {"error", {{"type", AnthropicErrorType(e.http_status)}, {"message", e.message}}}};
  } else {
    Json code = nullptr;
    if (e.http_status == 401) code = "invalid_api_key";
    if (e.http_status == 429) code = "rate_limit_exceeded";
    if (e.http_status == 413) code = "request_too_large";
    j = {{"error",
          {{"message", e.message},
           {"type", OpenAiErrorType(e.http_status)},
           {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
           {"code", code}}}};
  }
  return Dump(j);
}

}  // namespace g4::server
