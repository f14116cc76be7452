#include "cli/cli_util.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

namespace g4::cli {

StatusOr<uint64_t> ParseBytes(const std::string& text, const char* flag) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  double scale = 1;
  std::string unit = end ? std::string(end) : "";
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return InvalidArgument(std::string(flag) + ": '" + text + "' is not a size");
  if (end == text.c_str() || !(v >= 0) || v * scale > 1.8e19)
    return InvalidArgument(std::string(flag) + ": '" + text + "' is not a size");
  return static_cast<uint64_t>(v * scale);
}

StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) return InvalidArgument("empty item in id list '" + text + "'");
    errno = 0;
    char* rest = nullptr;
    long long v = std::strtoll(item.c_str(), &rest, 10);
    if (*rest != '\0' || errno == ERANGE || v < std::numeric_limits<int32_t>::min() ||
        v > std::numeric_limits<int32_t>::max())
      return InvalidArgument("'" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    start = end + 1;
  }
  return ids;
}

size_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

}  // namespace g4::cli
