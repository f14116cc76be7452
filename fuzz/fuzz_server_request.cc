// libFuzzer target: the server's request parsers (OpenAI chat and
// completions, Anthropic messages and count_tokens) must turn any body into
// a request or an error, never crash, hang or throw; what they accept must
// render (or be refused by RenderChat with a Status); and the streaming
// output parser must take the same bytes, split anywhere, and give back
// every byte that is not markup.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/anthropic_request.h"
#include "server/openai_request.h"
#include "server/output_parser.h"
#include "tokenizer/chat_format.h"

namespace {

void Render(const g4::server::ChatRequest& r) {
  g4::ChatOptions o;
  o.tools = r.tools;
  o.enable_thinking = r.enable_thinking;
  o.add_generation_prompt = !r.continue_last;
  auto text = g4::RenderChat(r.messages, o);
  if (text.ok() && text->rfind("<bos>", 0) != 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto json = g4::server::ParseObject(body);
  if (json.ok()) {
    if (auto chat = g4::server::ParseChatCompletionRequest(*json); chat.ok()) {
      if (chat->gen.n < 1 || chat->messages.empty()) __builtin_trap();
      Render(*chat);
    }
    if (auto c = g4::server::ParseCompletionRequest(*json); c.ok() && c->prompts.empty()) __builtin_trap();
    for (bool count : {false, true})
      if (auto m = g4::server::ParseMessagesRequest(*json, count); m.ok()) {
        if (!count && !m->gen.max_tokens) __builtin_trap();
        Render(*m);
      }
  }
  // The body as model output, in pieces of varying size.
  g4::server::OutputParser parser(size % 2 == 0);
  size_t out_bytes = 0, pos = 0, step = 1;
  auto take = [&](const std::vector<g4::server::OutputEvent>& events) {
    for (const auto& e : events) out_bytes += e.text.size() + e.call.name.size();
  };
  while (pos < size) {
    const size_t n = std::min(size - pos, step);
    take(parser.Push(body.substr(pos, n)));
    pos += n;
    step = step % 13 + 1;
  }
  take(parser.Finish());
  if (out_bytes > size) __builtin_trap();
  return 0;
}
