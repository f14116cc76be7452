# Writes OUTPUT, a C++ source defining `std::string_view FUNCTION()` in
# namespace NAMESPACE that returns the bytes of INPUT.
# Usage: cmake -DINPUT=... -DOUTPUT=... -DNAMESPACE=... -DFUNCTION=... -P embed_file.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by cmake/embed_file.cmake; do not edit.
#include <string_view>
namespace ${NAMESPACE} {
namespace {
const unsigned char kData[] = {
${bytes}
0};
}  // namespace
std::string_view ${FUNCTION}() { return {reinterpret_cast<const char*>(kData), ${size}}; }
}  // namespace ${NAMESPACE}
")
