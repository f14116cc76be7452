// libFuzzer target: the chat renderer (RenderChat) and the model-output
// parsers (SplitReasoning, ParseToolCalls). The input is split at 0x00 bytes
// into fields that fill a conversation: roles, contents, tool-call names and
// JSON arguments, tool definitions. RenderChat must return a prompt starting
// with "<bos>" or a "[chat]" Status, never crash or recurse without bound;
// the output parsers must keep every byte of text accounted for and return
// tool arguments that are JSON objects. A rendered assistant tool call must
// parse back to the same name.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_format.h"

namespace {

// Field i of the input, cycling when there are fewer fields than asked for.
class Fields {
 public:
  explicit Fields(std::string_view data) {
    size_t start = 0;
    for (size_t i = 0; i <= data.size(); ++i) {
      if (i == data.size() || data[i] == '\0') {
        fields_.push_back(data.substr(start, i - start));
        start = i + 1;
      }
    }
  }
  std::string Next() { return std::string(fields_[next_++ % fields_.size()]); }
  size_t size() const { return fields_.size(); }

 private:
  std::vector<std::string_view> fields_;
  size_t next_ = 0;
};

const char* kRoles[] = {"system", "user", "assistant", "tool", "model", "developer", "bogus"};

void CheckOutputParsers(std::string_view text) {
  g4::ReasoningSplit r = g4::SplitReasoning(text);
  if (r.reasoning.size() + r.answer.size() > text.size()) __builtin_trap();
  g4::ParsedToolCalls calls = g4::ParseToolCalls(text);
  if (calls.text.size() > text.size()) __builtin_trap();
  for (const g4::ToolCall& c : calls.calls) {
    if (c.name.empty()) __builtin_trap();
    auto j = nlohmann::ordered_json::parse(c.arguments_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  CheckOutputParsers(raw);

  Fields f(raw);
  const size_t shape = size ? data[0] : 0;
  std::vector<g4::ChatMessage> messages;
  const size_t n = 1 + shape % 5;
  for (size_t i = 0; i < n; ++i) {
    g4::ChatMessage m;
    m.role = kRoles[(shape / 5 + i) % 7];
    m.content = f.Next();
    if (m.role == "assistant" && (shape & 0x40)) {
      m.tool_calls.push_back({"id" + std::to_string(i), f.Next(), f.Next()});
      m.reasoning = f.Next();
    }
    if (m.role == "tool") {
      m.tool_call_id = "id" + std::to_string(i - 1);
      m.name = f.Next();
    }
    messages.push_back(std::move(m));
  }
  g4::ChatOptions options;
  options.enable_thinking = shape & 0x80;
  options.empty_thought_channel = shape & 0x20;
  options.add_generation_prompt = !(shape & 0x10);
  if (f.size() > 3) options.tools.push_back({f.Next(), f.Next(), f.Next()});

  auto prompt = g4::RenderChat(messages, options);
  if (!prompt.ok()) {
    if (prompt.status().message().rfind("[chat] ", 0) != 0) __builtin_trap();
    return 0;
  }
  if (prompt->rfind("<bos>", 0) != 0) __builtin_trap();
  CheckOutputParsers(*prompt);
  return 0;
}
