// ApiError: an HTTP error in the shape each API's clients parse.
//
//   OpenAI     {"error": {"message", "type", "param", "code"}}
//   Anthropic  {"type": "error", "error": {"type", "message"}}
//
// Handlers build one from a Status (the parsers' and the engine's errors) or
// directly (auth, limits); the HTTP layer writes it with its status code.
#pragma once

#include <string>

#include "core/status.h"

namespace g4::server {

enum class ApiFlavor { kOpenAi, kAnthropic };

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // OpenAI's "param" (the offending field), may be empty

  static ApiError BadRequest(std::string message, std::string param = "") {
    return {400, std::move(message), std::move(param)};
  }
  // InvalidArgument, OutOfRange, Unsupported, ResourceExhausted (a request
  // that can never fit) -> 400; NotFound -> 404; anything else -> 500. The
  // "[module] " prefix of the message is dropped.
  static ApiError FromStatus(const Status& status);
};

// The error body, as JSON text.
std::string ErrorBody(const ApiError& error, ApiFlavor flavor);
// The error type names: OpenAI ("invalid_request_error", ...) and Anthropic
// ("invalid_request_error", "authentication_error", "rate_limit_error", ...).
std::string OpenAiErrorType(int http_status);
std::string AnthropicErrorType(int http_status);

}  // namespace g4::server
