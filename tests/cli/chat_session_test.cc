// cli/chat_session: a conversation rebuilt from its rendered text (what a
// saved chat's KV file holds) renders again to the same text, for random
// conversations, with the chat renderer (tokenizer/chat_format.h) as the
// reference; and texts that are not chats are refused.
#include "cli/chat_session.h"

#include <gtest/gtest.h>

#include <random>

namespace g4::cli {
namespace {

std::string RandomText(std::mt19937& rng) {
  static const char* const kWords[] = {"hello", "what", "is", "a", "dictionary", "?", "Yes.", "line\nbreak",
                                       "caf\xc3\xa9", "1 + 1 = 2", "<b>", "end."};
  std::string s;
  const int n = 1 + rng() % 8;
  for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + kWords[rng() % std::size(kWords)];
  return s;
}

TEST(ChatSession, ParseInvertsRenderForRandomConversations) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Conversation c;
    if (rng() % 2) c.system = RandomText(rng);
    c.think = rng() % 3 == 0;
    const int turns = 1 + rng() % 6;
    for (int t = 0; t < turns; ++t) c.turns.push_back(TextMessage(t % 2 ? "assistant" : "user", RandomText(rng)));
    const bool empty_channel = rng() % 2;
    auto text = c.Render(empty_channel);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto parsed = ParseConversation(*text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << *text;
    EXPECT_EQ(parsed->system, c.system);
    EXPECT_EQ(parsed->think, c.think);
    // The rendered text ends with the open generation prompt: parsing drops it.
    auto again = parsed->Render(empty_channel);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *text) << "trial " << trial;
  }
}

TEST(ChatSession, AnUnfinishedAnswerIsTheLastTurn) {
  // What a chat's cache holds after an answer: the answer's tokens, without
  // the end-of-turn token generation stopped on.
  Conversation c;
  c.turns.push_back(TextMessage("user", "Hi"));
  auto prompt = c.Render(/*empty_thought_channel=*/true);
  ASSERT_TRUE(prompt.ok());
  auto parsed = ParseConversation(*prompt + "Hello! How can I help?");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->turns.size(), 2u);
  EXPECT_EQ(parsed->turns[1].role, "assistant");
  EXPECT_EQ(parsed->turns[1].content, "Hello! How can I help?");
  // The next turn renders the answer closed, as a fresh render of both turns does.
  c.turns.push_back(TextMessage("assistant", "Hello! How can I help?"));
  c.turns.push_back(TextMessage("user", "More"));
  parsed->turns.push_back(TextMessage("user", "More"));
  EXPECT_EQ(*parsed->Render(true), *c.Render(true));
}

TEST(ChatSession, TextsThatAreNotChatsAreRefused) {
  for (const char* text : {"", "<bos>The quick brown fox", "hello", "<bos><|turn>tool\nx<turn|>\n",
                           "<bos><|turn>user\nhi<turn|>\n<|turn>system\nlate<turn|>\n"}) {
    auto r = ParseConversation(text);
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("not a g4 chat conversation"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace g4::cli
