// From a parsed request to what the engine runs: the prompt's token ids and
// the JobSpec (sampling resolved against generation_config.json, stop ids,
// the token limit checked against the context).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model_bundle.h"
#include "server/job.h"
#include "server/requests.h"

namespace g4::server {

struct ServingLimits {
  int64_t context = 0;          // the model's context (max_position_embeddings)
  int default_max_tokens = 2048;
};

// The chat prompt as token ids (RenderChat, then Encode). A request that
// continues its last assistant message ends without closing that turn.
StatusOr<std::vector<int32_t>> ChatPromptIds(const ChatRequest& request, const ModelBundle& bundle);
// The stop ids of a chat: end of turn and end of text, and the start of a
// tool response when tools were given (the model hands over to the tool).
std::vector<int> ChatStopIds(const ChatRequest& request, const ModelBundle& bundle);
// A completion prompt as ids: text encoded, with <bos> first when the
// tokenizer asks for it; ids as given.
StatusOr<std::vector<int32_t>> CompletionPromptIds(const CompletionPrompt& prompt, const ModelBundle& bundle);

// InvalidArgument when the prompt plus max_tokens exceeds the context;
// max_tokens unset: the server default, cut to what the context leaves.
StatusOr<JobSpec> MakeJobSpec(const GenerationRequest& request, std::vector<int32_t> prompt, std::vector<int> stop_ids,
                              const ModelBundle& bundle, const ServingLimits& limits);

}  // namespace g4::server
