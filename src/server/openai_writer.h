// Response bodies of the OpenAI endpoints, streamed (SSE chunks ending with
// "data: [DONE]") or whole.
//
// ChatWriter builds chat.completion / chat.completion.chunk objects from the
// parsed output of each choice (OutputParser events): answer text as
// `content`, reasoning as `reasoning_content`, tool calls as `tool_calls`
// (streamed as a chunk with id, type and name, then one with the arguments,
// as OpenAI does), per-token `logprobs`, and `usage` with
// `prompt_tokens_details.cached_tokens`. CompletionWriter does the same for
// text_completion objects (legacy logprobs).
//
// In stream mode each method returns the SSE text to send; otherwise they
// return "" and End returns the JSON body.
//
// Threading: none (one per request).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/sampler.h"
#include "server/json_util.h"
#include "server/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace g4::server {

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

// {"token", "logprob", "bytes", "top_logprobs"} entries for the chat API.
Json ChatLogprobs(const Tokenizer& tokenizer, const std::vector<LogProbs>& logprobs);

class ChatWriter {
 public:
  ChatWriter(const Tokenizer& tokenizer, std::string model, int n, bool stream, bool include_usage, bool logprobs);

  std::string Start();  // the role chunk of every choice
  std::string Events(int choice, const std::vector<OutputEvent>& events, const std::vector<LogProbs>& logprobs);
  // reason: "stop" or "length" ("stop" becomes "tool_calls" when the choice
  // made calls).
  std::string Finish(int choice, const std::string& reason);
  std::string End(const Usage& usage);
  // A choice failed in the engine: streamed, an error object as a data
  // line; whole, End returns an error body instead of the completion.
  std::string StreamError(const std::string& message);

  const std::string& id() const { return id_; }

 private:
  struct Choice {
    std::string content, reasoning;
    Json tool_calls = Json::array();
    Json logprobs = Json::array();
    std::string finish_reason;
    int calls = 0;
  };
  Json Chunk(int choice, Json delta, const Json& logprobs, const Json& finish_reason) const;

  const Tokenizer& tokenizer_;
  std::string id_, model_;
  int64_t created_;
  bool stream_, include_usage_, logprobs_;
  std::vector<Choice> choices_;
  std::string error_;
};

class CompletionWriter {
 public:
  CompletionWriter(const Tokenizer& tokenizer, std::string model, int choices, bool stream, bool include_usage,
                   bool logprobs);

  // `text` is new text of choice i; `tokens`/`logprobs` its new tokens.
  std::string Text(int choice, const std::string& text, const std::vector<int32_t>& tokens,
                   const std::vector<LogProbs>& logprobs);
  std::string Finish(int choice, const std::string& reason);
  std::string End(const Usage& usage);
  std::string StreamError(const std::string& message);

 private:
  struct Choice {
    std::string text;
    Json lp_tokens = Json::array(), lp_values = Json::array(), lp_top = Json::array(), lp_offsets = Json::array();
    std::string finish_reason;
  };
  Json Logprobs(Choice& c, const std::vector<LogProbs>& logprobs, size_t text_offset);
  Json Object(Json choices) const;

  const Tokenizer& tokenizer_;
  std::string id_, model_;
  int64_t created_;
  bool stream_, include_usage_, logprobs_;
  std::vector<Choice> choices_;
  std::string error_;
};

}  // namespace g4::server
