// Parsing of OpenAI request bodies: POST /v1/chat/completions and
// POST /v1/completions. Every error is InvalidArgument (a 400 in the API's
// error shape) naming the field; features g4 cannot honour (response_format
// other than text, tool_choice "required" or a named function, image parts,
// suffix, best_of) are refused with Unsupported rather than ignored.
// Unknown fields are ignored, as OpenAI-compatible servers do.
//
// The parsers only read the JSON: token ids in logit_bias and prompts are
// range-checked later, against the model (ValidateSamplingParams, Submit).
#pragma once

#include "core/status.h"
#include "server/json_util.h"
#include "server/requests.h"

namespace g4::server {

StatusOr<ChatRequest> ParseChatCompletionRequest(const Json& body, const RequestLimits& limits = {});
StatusOr<CompletionRequest> ParseCompletionRequest(const Json& body, const RequestLimits& limits = {});

// The fields both share: sampling, limits, stop, n, stream. `chat` picks
// the chat spelling of logprobs (bool + top_logprobs) over the legacy one
// (an integer).
Status ParseOpenAiGeneration(const Json& body, const RequestLimits& limits, bool chat, GenerationRequest* out);

}  // namespace g4::server
