// Gemma 4 chat format: renders a conversation into the prompt text the IT
// models were trained on, and splits model output back into reasoning, answer
// and tool calls.
//
// RenderChat reproduces the released Jinja chat template (text-only path;
// spec: shared docs gemma4-architecture.md 6.3, rules in docs/chat-format.md)
// byte for byte, so the result must be encoded WITHOUT auto-added specials:
// it already starts with "<bos>". Message content is inserted verbatim (after
// trimming), as the template does: a user who types "<|turn>" gets the control
// token. Template fields that the markup itself delimits (tool names, argument
// and schema keys) are validated instead, because a "<|" or "{" there would
// silently change the structure the model sees.
//
// Tool-call arguments and tool parameter schemas travel as JSON text, the
// form the OpenAI API carries them in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace g4 {

struct ToolCall {
  std::string id;              // optional; pairs a tool result with its call
  std::string name;
  std::string arguments_json;  // a JSON object ("" = no arguments)
};

struct ChatMessage {
  // system | developer | user | assistant | model | tool. "model" is an alias
  // of "assistant"; system/developer only as the first message.
  std::string role;
  std::string content;
  // assistant: reasoning of a turn that made tool calls after the last user
  // message (rendered as a closed thought channel, as the template does).
  std::string reasoning;
  std::vector<ToolCall> tool_calls;  // assistant only
  // tool: the call answered (matched against ToolCall::id) and the tool's
  // name, used when no call id matches.
  std::string tool_call_id;
  std::string name;
};

// A message with only a role and content.
ChatMessage TextMessage(std::string role, std::string content);

struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters_json;  // a JSON Schema object ("" = none)
};

struct ChatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = false;
  // The 12B/26B/31B templates follow the generation prompt with an empty,
  // closed thought channel when thinking is off; the E2B/E4B templates do
  // not. Set from the model's own template (TemplateClosesThoughtChannel).
  bool empty_thought_channel = false;
  std::vector<ToolDefinition> tools;
};

// The prompt text, starting with "<bos>". InvalidArgument (naming the message
// index and field) for: no messages, an unknown role, a system/developer
// message that is not first, tool calls on a non-assistant message, a tool
// message that answers no preceding assistant tool call, a name or key that
// would break the markup, or JSON that is not an object.
StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages, const ChatOptions& options);

// True when a chat template's source (chat_template.jinja, or the
// chat_template string of tokenizer_config.json) appends the empty thought
// channel after the generation prompt, i.e. ChatOptions::empty_thought_channel.
bool TemplateClosesThoughtChannel(std::string_view template_source);

// ---- Model output ----

struct ReasoningSplit {
  std::string reasoning;  // text inside thought channels, channel name line removed
  std::string answer;     // everything outside them, verbatim
};
// Splits "<|channel>thought\n...<channel|>answer". Several channels are
// joined with "\n"; an unclosed channel (output cut short) is all reasoning;
// a "<channel|>" with no opener closes a channel the prompt opened.
ReasoningSplit SplitReasoning(std::string_view text);

struct ParsedToolCalls {
  std::vector<ToolCall> calls;  // id empty; arguments_json compact, keys in output order
  std::string text;             // the input with every parsed call removed
};
// Finds "<|tool_call>call:NAME{...}<tool_call|>" blocks and converts their
// arguments back to JSON. A block that does not parse stays in `text`
// unchanged, markers and all.
ParsedToolCalls ParseToolCalls(std::string_view text);

}  // namespace g4
