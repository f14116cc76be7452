// Small helpers shared by the CLI commands: parsing lists, memory use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace g4::cli {

// "5,17,3" -> {5, 17, 3}. Empty items, non-integers and values outside int32
// are errors naming the item.
StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text);

// "512", "64K", "2M", "1.5G" (optionally with a B) -> bytes; an error
// naming `flag` otherwise.
StatusOr<uint64_t> ParseBytes(const std::string& text, const char* flag);

// Peak resident set size of this process in bytes (VmHWM).
size_t PeakRssBytes();

}  // namespace g4::cli
