// Internal to io/safetensors.cc: the safetensors JSON header, parsed in one
// streaming pass (nlohmann SAX) straight into tensor entries, with no DOM.
//
// Why not a DOM: the header is the one JSON g4 reads whose size is set by the
// file (up to kMaxSafetensorsHeaderBytes = 100 MB, 1.6M entries). Building
// nlohmann values for it cost ~70 bytes of memory per byte of '[' and, with
// the duplicate-key callback, quadratic time; error messages dumped values
// recursively. Here every value is checked as it arrives against the one
// shape a header may have (an object of entries, each {dtype, shape,
// data_offsets} of scalars and flat arrays), so a wrong type or a nested
// array fails at its first byte, and memory is the entries themselves
// (about 3 bytes per header byte at worst).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace g4::safetensors_internal {

// One header entry after field-level validation, before range checks.
struct RawEntry {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0, nbytes = 0;
};

// Parses header text [begin, end). Errors (kCorrupt, or kUnsupported for an
// unknown dtype) read "[safetensors] <label>: ...". Duplicate tensor names
// are left for the caller's index to catch.
Status ParseHeader(const char* begin, const char* end, const std::string& label, std::vector<RawEntry>* entries,
                   std::map<std::string, std::string>* metadata);

}  // namespace g4::safetensors_internal
