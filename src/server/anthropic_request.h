// Parsing of Anthropic request bodies: POST /v1/messages and
// POST /v1/messages/count_tokens, into the server's ChatRequest.
//
// Messages alternate user/assistant; content is a string or blocks. Blocks
// map onto Gemma's chat as: text -> the turn's text; thinking -> the
// assistant's reasoning (redacted_thinking is dropped); tool_use -> a tool
// call (input serialized as JSON); tool_result -> a tool response (role
// "tool") placed before the user's text. A final assistant message is
// continued (Anthropic's prefill). Images and documents, server tools,
// tool_choice "any"/"tool" are refused with Unsupported.
#pragma once

#include "core/status.h"
#include "server/json_util.h"
#include "server/requests.h"

namespace g4::server {

// `count_tokens`: the count_tokens body (no max_tokens, no sampling).
StatusOr<ChatRequest> ParseMessagesRequest(const Json& body, bool count_tokens = false,
                                           const RequestLimits& limits = {});

}  // namespace g4::server
