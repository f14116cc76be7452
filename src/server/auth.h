// API-key checks. With a key configured, a request must carry it as
// "Authorization: Bearer KEY" (OpenAI clients) or "x-api-key: KEY"
// (Anthropic clients); the comparison takes the same time wherever the
// strings first differ.
#pragma once

#include <string>
#include <string_view>

namespace g4::server {

// Equality in time that depends only on the lengths (the key's length is
// not secret; its bytes are).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The key a request presents: the x-api-key header, else the token of an
// "Authorization: Bearer" header (scheme case-insensitive), else "".
std::string PresentedKey(std::string_view authorization, std::string_view x_api_key);

}  // namespace g4::server
