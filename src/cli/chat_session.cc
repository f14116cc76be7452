#include "cli/chat_session.h"

namespace g4::cli {
namespace {

constexpr std::string_view kBos = "<bos>";
constexpr std::string_view kOpen = "<|turn>";
constexpr std::string_view kClose = "<turn|>";
constexpr std::string_view kThink = "<|think|>";

}  // namespace

StatusOr<std::string> Conversation::Render(bool empty_thought_channel) const {
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back(TextMessage("system", system));
  messages.insert(messages.end(), turns.begin(), turns.end());
  ChatOptions options;
  options.enable_thinking = think;
  options.empty_thought_channel = empty_thought_channel;
  return RenderChat(messages, options);
}

StatusOr<Conversation> ParseConversation(std::string_view text) {
  auto bad = [](const std::string& why) { return InvalidArgument("not a g4 chat conversation: " + why); };
  if (text.substr(0, kBos.size()) != kBos) return bad("it does not start with <bos>");
  text.remove_prefix(kBos.size());
  Conversation c;
  bool first = true;
  while (!text.empty()) {
    if (text.substr(0, kOpen.size()) != kOpen) return bad("expected <|turn> at \"" + std::string(text.substr(0, 20)) + "\"");
    text.remove_prefix(kOpen.size());
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      if (text == "model") break;  // an open generation prompt with nothing after it
      return bad("a turn without a role line");
    }
    const std::string role(text.substr(0, nl));
    text.remove_prefix(nl + 1);
    const size_t close = text.find(kClose);
    std::string content(text.substr(0, close));
    text.remove_prefix(close == std::string_view::npos ? text.size() : close + kClose.size());
    if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    if (role == "system") {
      if (!first) return bad("a system turn after the first");
      if (content.rfind(kThink, 0) == 0) {
        c.think = true;
        content.erase(0, kThink.size());
        if (!content.empty() && content.front() == '\n') content.erase(0, 1);
      }
      c.system = content;
    } else if (role == "user") {
      c.turns.push_back(TextMessage("user", content));
    } else if (role == "model") {
      const std::string answer = SplitReasoning(content).answer;
      // An empty last model turn is the generation prompt, not an answer.
      if (!(close == std::string_view::npos && answer.empty()))
        c.turns.push_back(TextMessage("assistant", answer));
    } else {
      return bad("a turn with role \"" + role + "\"");
    }
    first = false;
  }
  return c;
}

}  // namespace g4::cli
