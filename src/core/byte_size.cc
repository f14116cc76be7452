#include "core/byte_size.h"

#include <cstdio>

namespace g4 {

std::string GiB(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

}  // namespace g4
