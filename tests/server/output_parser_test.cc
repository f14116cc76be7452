// OutputParser against the chat format's own whole-text parsers: for random
// model outputs built from text, thought channels, tool calls (written by
// RenderChat, so in the template's syntax), malformed calls and stray
// markers, split into random pieces, the streamed reasoning, answer text and
// calls equal SplitReasoning + ParseToolCalls of the whole text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "server/output_parser.h"
#include "tokenizer/chat_format.h"

namespace g4::server {
namespace {

struct Parsed {
  std::string reasoning, text;
  std::vector<ToolCall> calls;
};

// The reference: the whole-text parsers of tokenizer/chat_format.h.
Parsed Reference(const std::string& output, bool tools) {
  ReasoningSplit split = SplitReasoning(output);
  Parsed p;
  p.reasoning = split.reasoning;
  if (tools) {
    ParsedToolCalls calls = ParseToolCalls(split.answer);
    p.text = calls.text;
    p.calls = calls.calls;
  } else {
    p.text = split.answer;
  }
  return p;
}

Parsed Streamed(const std::string& output, bool tools, std::mt19937& rng) {
  OutputParser parser(tools);
  Parsed p;
  auto take = [&](const std::vector<OutputEvent>& events) {
    for (const OutputEvent& e : events) {
      if (e.kind == OutputEvent::Kind::kText) p.text += e.text;
      if (e.kind == OutputEvent::Kind::kReasoning) p.reasoning += e.text;
      if (e.kind == OutputEvent::Kind::kToolCall) p.calls.push_back(e.call);
    }
  };
  size_t pos = 0;
  while (pos < output.size()) {
    const size_t n = std::min<size_t>(output.size() - pos, 1 + rng() % 7);
    take(parser.Push(std::string_view(output).substr(pos, n)));
    pos += n;
  }
  take(parser.Finish());
  return p;
}

// A tool call as the template writes it, taken from a rendered assistant turn.
std::string RenderedCall(const std::string& name, const std::string& args_json) {
  ChatOptions options;
  options.add_generation_prompt = false;
  std::vector<ChatMessage> msgs{TextMessage("user", "q")};
  ChatMessage a = TextMessage("assistant", "");
  a.tool_calls.push_back({"", name, args_json});
  msgs.push_back(a);
  auto text = RenderChat(msgs, options);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  const size_t b = text->find("<|tool_call>");
  const size_t e = text->find("<tool_call|>");
  return text->substr(b, e + 12 - b);
}

std::string RandomOutput(std::mt19937& rng, bool* has_stray_first_close) {
  static const char* kWords[] = {"The ", "answer", " is ", "42", ".\n", "é", "日本", " <not a marker> ", "<|", "|>",
                                 "thought", "\n", "<channel", "tool_call", "{x:1}", "😀"};
  static const std::vector<std::pair<std::string, std::string>> kCalls = {
      {"get_weather", R"({"city":"Paris","unit":"celsius"})"},
      {"search", R"({"query":"a \"quoted\" text","count":3,"exact":true})"},
      {"noop", "{}"},
      {"nested", R"({"filter":{"tags":["a","b"],"min":2.5},"limit":null})"}};
  std::string out;
  bool opened = false;
  *has_stray_first_close = false;
  const int parts = 1 + rng() % 8;
  for (int i = 0; i < parts; ++i) {
    switch (rng() % 9) {
      case 0:
      case 1:
      case 2:
        for (int w = rng() % 5; w >= 0; --w) out += kWords[rng() % std::size(kWords)];
        break;
      case 3: {  // a thought channel, sometimes with the bare name only
        out += "<|channel>";
        const int kind = rng() % 4;
        if (kind == 0) out += "thought";
        else if (kind == 1) out += "thought\nI should think. " + std::string(kWords[rng() % std::size(kWords)]);
        else if (kind == 2) out += "other channel text";
        else out += "thought\n";
        if (rng() % 6 != 0) out += "<channel|>";  // sometimes unclosed (cut short)
        opened = true;
        break;
      }
      case 4:
      case 5: {
        const auto& c = kCalls[rng() % kCalls.size()];
        out += RenderedCall(c.first, c.second);
        break;
      }
      case 6:  // a call that does not parse
        out += rng() % 2 ? "<|tool_call>call:bad name{x:1}<tool_call|>" : "<|tool_call>call:f{x:<|\"|>open";
        break;
      case 7:  // a stray close
        if (!opened) *has_stray_first_close = true;
        out += "<channel|>";
        break;
      case 8:
        out += "<tool_call|> <|tool_response>";
        break;
    }
  }
  return out;
}

bool ChannelInsideCall(const std::string& s) {
  for (size_t open = s.find("<|tool_call>"); open != std::string::npos; open = s.find("<|tool_call>", open + 1)) {
    const size_t close = s.find("<tool_call|>", open);
    const size_t channel = s.find("<|channel>", open);
    if (channel != std::string::npos && channel < close) return true;
  }
  return false;
}

TEST(OutputParser, StreamedEqualsWholeTextParsersForAnySplit) {
  std::mt19937 rng(7);
  int compared = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    bool stray = false;
    const std::string output = RandomOutput(rng, &stray);
    // Documented differences (see the tests below): a close before any
    // channel, and a channel opened inside a tool-call block.
    if (output.find("<channel|>") < output.find("<|channel>")) continue;
    if (ChannelInsideCall(output)) continue;
    for (bool tools : {true, false}) {
      const Parsed want = Reference(output, tools);
      const Parsed got = Streamed(output, tools, rng);
      ASSERT_EQ(got.reasoning, want.reasoning) << output;
      ASSERT_EQ(got.text, want.text) << output;
      ASSERT_EQ(got.calls.size(), want.calls.size()) << output;
      for (size_t i = 0; i < got.calls.size(); ++i) {
        EXPECT_EQ(got.calls[i].name, want.calls[i].name);
        EXPECT_EQ(got.calls[i].arguments_json, want.calls[i].arguments_json);
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 2000);
}

TEST(OutputParser, ToolCallArgumentsRoundTripAsJson) {
  const std::string args = R"({"city":"Paris","days":[1,2],"opts":{"metric":true}})";
  std::mt19937 rng(1);
  const Parsed p = Streamed("Let me check." + RenderedCall("get_weather", args) + "<|tool_response>", true, rng);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments_json), nlohmann::json::parse(args));
  EXPECT_EQ(p.text, "Let me check.<|tool_response>");
}

TEST(OutputParser, StrayCloseBeforeAnyChannelIsDropped) {
  std::mt19937 rng(3);
  const Parsed p = Streamed("abc<channel|>def", true, rng);
  EXPECT_EQ(p.text, "abcdef");
  EXPECT_EQ(p.reasoning, "");
  // After a channel, a stray close is ordinary text (as SplitReasoning keeps it).
  const Parsed q = Streamed("<|channel>thought\nr<channel|>a<channel|>b", true, rng);
  EXPECT_EQ(q.reasoning, "r");
  EXPECT_EQ(q.text, "a<channel|>b");
}

TEST(OutputParser, HoldsBackOnlyWhatCouldBeAMarker) {
  OutputParser parser(true);
  auto text = [](const std::vector<OutputEvent>& ev) {
    std::string s;
    for (const auto& e : ev) s += e.text;
    return s;
  };
  EXPECT_EQ(text(parser.Push("Hello <")), "Hello ");
  EXPECT_EQ(text(parser.Push("b>")), "<b>");
  EXPECT_EQ(text(parser.Push("x <|tool")), "x ");
  EXPECT_EQ(text(parser.Finish()), "<|tool");
}

}  // namespace
}  // namespace g4::server
