#include "server/sse.h"

#include <random>

namespace g4::server {

std::string SseData(std::string_view data) {
  std::string s = "data: ";
  s += data;
  s += "\n\n";
  return s;
}

std::string SseEvent(std::string_view name, std::string_view data) {
  std::string s = "event: ";
  s += name;
  s += "\ndata: ";
  s += data;
  s += "\n\n";
  return s;
}

std::string RandomId(std::string_view prefix) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{(static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()};
  std::string s(prefix);
  for (int i = 0; i < 24; ++i) s += kChars[rng() % (sizeof kChars - 1)];
  return s;
}

}  // namespace g4::server
