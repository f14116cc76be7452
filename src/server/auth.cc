#include "server/auth.h"

#include <cctype>

namespace g4::server {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of `a` is compared against `b` (cycled), so the time depends
  // on a's length only.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  if (b.empty()) return a.empty();
  for (size_t i = 0; i < a.size(); ++i)
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i % b.size()]);
  return diff == 0;
}

std::string PresentedKey(std::string_view authorization, std::string_view x_api_key) {
  if (!x_api_key.empty()) return std::string(x_api_key);
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() <= kBearer.size()) return "";
  for (size_t i = 0; i < kBearer.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kBearer[i]) return "";
  std::string_view key = authorization.substr(kBearer.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  return std::string(key);
}

}  // namespace g4::server
