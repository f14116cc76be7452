// Element types of stored tensors, named as safetensors names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace g4 {

enum class DType : uint8_t {
  kF64, kF32, kF16, kBF16, kF8E4M3, kF8E5M2,
  kU8, kI8, kU16, kI16, kU32, kI32, kU64, kI64, kBool,
};

// Bytes per element.
size_t DTypeSize(DType t);
// "F32", "BF16", "F8_E4M3", ... (the safetensors spelling).
std::string_view DTypeName(DType t);
std::optional<DType> ParseDType(std::string_view name);
bool IsFloat(DType t);

}  // namespace g4
