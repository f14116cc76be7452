// Pieces shared by the chat renderer (chat_format.cc) and the model-output
// parsers (chat_format_parse.cc). Not part of the public interface.
#pragma once

#include <string>
#include <string_view>

namespace g4::chat_internal {

// The string delimiter of Gemma 4's tool syntax (token 52).
inline constexpr std::string_view kQuote = "<|\"|>";

// Nesting limit for JSON values rendered or parsed recursively: keeps hostile
// input from exhausting the stack.
inline constexpr int kMaxDepth = 64;

// Python's str.strip(): removes leading and trailing Unicode whitespace (the
// characters str.isspace() accepts), which is what Jinja's `trim` does.
std::string_view Trim(std::string_view s);

std::string LowerAscii(std::string_view s);

}  // namespace g4::chat_internal
