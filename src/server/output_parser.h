// OutputParser: splits a chat answer, as it streams in, into reasoning,
// answer text and tool calls (Gemma 4's markup, docs/chat-format.md):
//
//   <|channel>thought\n ... <channel|>             reasoning
//   <|tool_call>call:NAME{...}<tool_call|>         a tool call (when tools were given)
//   everything else                                answer text
//
// Push takes the decoded text in pieces of any size (a marker may be split
// across pieces) and returns the events that are certain; text that could
// still be the start of a marker is held back. Finish ends the stream. For
// any split, the concatenated reasoning equals SplitReasoning(text).reasoning
// and the answer text and calls equal ParseToolCalls(SplitReasoning(text)
// .answer), except that a "<channel|>" before any channel opened is dropped
// (SplitReasoning makes the text before it reasoning, but streamed text
// cannot be taken back), and that a channel opened inside a tool-call block
// belongs to the block. A tool-call block that does not parse stays in the
// answer, markers and all; so does one cut short by the end of the output.
//
// Threading: none (one per streamed choice).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_format.h"

namespace g4::server {

struct OutputEvent {
  enum class Kind { kText, kReasoning, kToolCall };
  Kind kind = Kind::kText;
  std::string text;  // kText, kReasoning
  ToolCall call;     // kToolCall (id empty: the writer names it)
};

class OutputParser {
 public:
  explicit OutputParser(bool parse_tool_calls) : tools_(parse_tool_calls) {}

  std::vector<OutputEvent> Push(std::string_view text);
  std::vector<OutputEvent> Finish();

 private:
  enum class State { kText, kChannelName, kReasoning, kToolCall };
  void Emit(OutputEvent::Kind kind, std::string_view text, std::vector<OutputEvent>* out);
  void Run(bool final, std::vector<OutputEvent>* out);

  bool tools_;
  State state_ = State::kText;
  std::string buf_;        // not yet consumed
  std::string call_;       // kToolCall: the block so far, from "<|tool_call>"
  bool any_reasoning_ = false;
  bool new_channel_ = false;  // the next reasoning piece starts a channel
  bool seen_channel_ = false;
};

}  // namespace g4::server
