// Server-sent events framing and the ids responses carry.
#pragma once

#include <string>
#include <string_view>

namespace g4::server {

// "data: DATA\n\n" (OpenAI streams: DATA is one line of JSON or [DONE]).
std::string SseData(std::string_view data);
// "event: NAME\ndata: DATA\n\n" (Anthropic streams).
std::string SseEvent(std::string_view name, std::string_view data);
// PREFIX followed by 24 random letters and digits ("chatcmpl-", "msg_", ...).
std::string RandomId(std::string_view prefix);

}  // namespace g4::server
