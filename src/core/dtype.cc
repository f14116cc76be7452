#include "core/dtype.h"

namespace g4 {
namespace {
struct Entry { DType t; std::string_view name; size_t size; bool is_float; };
constexpr Entry kTable[] = {
    {DType::kF64, "F64", 8, true},      {DType::kF32, "F32", 4, true},
    {DType::kF16, "F16", 2, true},      {DType::kBF16, "BF16", 2, true},
    {DType::kF8E4M3, "F8_E4M3", 1, true}, {DType::kF8E5M2, "F8_E5M2", 1, true},
    {DType::kU8, "U8", 1, false},       {DType::kI8, "I8", 1, false},
    {DType::kU16, "U16", 2, false},     {DType::kI16, "I16", 2, false},
    {DType::kU32, "U32", 4, false},     {DType::kI32, "I32", 4, false},
    {DType::kU64, "U64", 8, false},     {DType::kI64, "I64", 8, false},
    {DType::kBool, "BOOL", 1, false},
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == static_cast<size_t>(DType::kBool) + 1);
const Entry& Find(DType t) { return kTable[static_cast<size_t>(t)]; }
}  // namespace

size_t DTypeSize(DType t) { return Find(t).size; }
std::string_view DTypeName(DType t) { return Find(t).name; }
bool IsFloat(DType t) { return Find(t).is_float; }

std::optional<DType> ParseDType(std::string_view name) {
  for (const Entry& e : kTable)
    if (e.name == name) return e.t;
  return std::nullopt;
}

}  // namespace g4
