// Byte counts for messages: "12.50 GiB".
#pragma once

#include <cstddef>
#include <string>

namespace g4 {

// `bytes` in GiB with two decimals ("0.00 GiB" below 5 MiB).
std::string GiB(size_t bytes);

}  // namespace g4
