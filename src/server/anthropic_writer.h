// Response bodies of POST /v1/messages, streamed or whole.
//
// Content blocks follow the output as it is parsed: reasoning becomes a
// `thinking` block, answer text a `text` block, each tool call a `tool_use`
// block (its input streamed as one input_json_delta). A new block starts
// whenever the kind changes. The stream is exactly Anthropic's sequence:
//
//   message_start, ping,
//   (content_block_start, content_block_delta*, content_block_stop)*,
//   message_delta (stop_reason, stop_sequence, usage), message_stop
//
// stop_reason: "end_turn", "stop_sequence" (with the string), "max_tokens",
// or "tool_use" when the answer made calls. Usage reports input_tokens
// (prompt tokens not read from the cache), cache_read_input_tokens and
// output_tokens.
//
// Threading: none (one per request).
#pragma once

#include <string>
#include <vector>

#include "server/json_util.h"
#include "server/output_parser.h"

namespace g4::server {

class MessagesWriter {
 public:
  MessagesWriter(std::string model, bool stream, int prompt_tokens, int cached_tokens);

  std::string Start();
  std::string Events(const std::vector<OutputEvent>& events);
  // reason: "stop" or "length"; `stop_string` the stop sequence that ended
  // it (empty for an end-of-turn token). Stream: the closing events;
  // otherwise the JSON body.
  std::string Finish(const std::string& reason, const std::string& stop_string, int output_tokens);
  std::string StreamError(const std::string& message);

 private:
  enum class Block { kNone, kText, kThinking };
  std::string Open(Block kind);
  std::string Close();

  std::string id_, model_;
  bool stream_;
  int prompt_tokens_, cached_tokens_;
  Json content_ = Json::array();  // non-stream: the blocks
  Block open_ = Block::kNone;
  int index_ = -1;                // of the open (or last) block
  bool tool_use_ = false;
};

}  // namespace g4::server
