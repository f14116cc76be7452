// Response writers: a stream, accumulated the way the SDKs accumulate it
// (OpenAI: deltas by choice and tool-call index; Anthropic: blocks by
// index), equals the whole response written from the same output; the
// streams follow their APIs' grammar (role chunk first, finish chunk, usage
// chunk with no choices, [DONE]; message_start ... message_stop).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "server/anthropic_writer.h"
#include "server/openai_writer.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace g4::server {
namespace {

std::vector<std::pair<std::string, Json>> ParseSse(const std::string& body) {
  std::vector<std::pair<std::string, Json>> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event";
    if (end == std::string::npos) break;
    std::string event, data;
    const std::string block = body.substr(pos, end - pos);
    size_t l = 0;
    while (l < block.size()) {
      size_t e = block.find('\n', l);
      if (e == std::string::npos) e = block.size();
      const std::string line = block.substr(l, e - l);
      if (line.rfind("event: ", 0) == 0) event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) data = line.substr(6);
      l = e + 1;
    }
    out.push_back({event, data == "[DONE]" ? Json("[DONE]") : Json::parse(data)});
    pos = end + 2;
  }
  return out;
}

// The output of one choice as parser events, with random text splits.
std::vector<std::vector<OutputEvent>> ScriptFor(int seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<OutputEvent>> batches;
  const char* texts[] = {"Hello", " wor", "ld", "! ", "é", "\n"};
  for (int b = 0; b < 12; ++b) {
    std::vector<OutputEvent> batch;
    for (int k = rng() % 3; k >= 0; --k) {
      OutputEvent e;
      const int kind = rng() % 6;
      if (kind < 3) {
        e.kind = OutputEvent::Kind::kText;
        e.text = texts[rng() % 6];
      } else if (kind < 5) {
        e.kind = OutputEvent::Kind::kReasoning;
        e.text = texts[rng() % 6];
      } else {
        e.kind = OutputEvent::Kind::kToolCall;
        e.call.name = "f" + std::to_string(rng() % 3);
        e.call.arguments_json = "{\"x\":" + std::to_string(rng() % 100) + "}";
      }
      batch.push_back(e);
    }
    batches.push_back(batch);
  }
  return batches;
}

Tokenizer& Tok() {
  static Tokenizer* t = [] {
    auto tok = Tokenizer::Load((std::filesystem::path(__FILE__).parent_path() / "../../models/demo").string());
    EXPECT_TRUE(tok.ok());
    return new Tokenizer(std::move(tok).value());
  }();
  return *t;
}

TEST(ChatWriter, StreamAccumulatesToTheWholeResponse) {
  for (int seed = 0; seed < 20; ++seed) {
    const int n = 1 + seed % 3;
    ChatWriter stream(Tok(), "m", n, true, true, false), whole(Tok(), "m", n, false, false, false);
    std::string body = stream.Start();
    for (int i = 0; i < n; ++i)
      for (const auto& batch : ScriptFor(seed * 10 + i)) {
        body += stream.Events(i, batch, {});
        whole.Events(i, batch, {});
      }
    for (int i = 0; i < n; ++i) {
      body += stream.Finish(i, i == 1 ? "length" : "stop");
      whole.Finish(i, i == 1 ? "length" : "stop");
    }
    const Usage usage{10, 20, 4};
    body += stream.End(usage);
    const Json want = Json::parse(whole.End(usage));

    const auto events = ParseSse(body);
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.back().second, "[DONE]");
    const Json& usage_chunk = events[events.size() - 2].second;
    EXPECT_TRUE(usage_chunk["choices"].empty());
    EXPECT_EQ(usage_chunk["usage"], want["usage"]);
    EXPECT_EQ(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
    // Accumulate like the SDK's ChatCompletionStream.
    std::vector<Json> msgs(n, Json{{"role", nullptr}, {"content", ""}, {"reasoning_content", ""}});
    std::vector<Json> calls(n, Json::array());
    std::vector<std::string> finish(n);
    for (size_t k = 0; k + 2 < events.size(); ++k) {
      const Json& c = events[k].second;
      EXPECT_EQ(c["object"], "chat.completion.chunk");
      EXPECT_EQ(c["id"], stream.id());
      ASSERT_EQ(c["choices"].size(), 1u);
      const Json& ch = c["choices"][0];
      const int i = ch["index"];
      EXPECT_TRUE(finish[i].empty()) << "a chunk after the finish chunk";
      const Json& d = ch["delta"];
      if (d.contains("role")) msgs[i]["role"] = d["role"];
      if (d.contains("content")) msgs[i]["content"] = msgs[i]["content"].get<std::string>() + d["content"].get<std::string>();
      if (d.contains("reasoning_content"))
        msgs[i]["reasoning_content"] =
            msgs[i]["reasoning_content"].get<std::string>() + d["reasoning_content"].get<std::string>();
      if (d.contains("tool_calls"))
        for (const Json& tc : d["tool_calls"]) {
          const size_t idx = tc["index"];
          if (idx == calls[i].size()) {
            EXPECT_TRUE(tc.contains("id"));
            calls[i].push_back({{"id", tc["id"]}, {"type", tc["type"]}, {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
          }
          ASSERT_LT(idx, calls[i].size());
          calls[i][idx]["function"]["arguments"] = calls[i][idx]["function"]["arguments"].get<std::string>() +
                                                   tc["function"]["arguments"].get<std::string>();
        }
      if (!ch["finish_reason"].is_null()) finish[i] = ch["finish_reason"];
    }
    for (int i = 0; i < n; ++i) {
      const Json& w = want["choices"][i];
      EXPECT_EQ(msgs[i]["role"], "assistant");
      EXPECT_EQ(finish[i], w["finish_reason"]);
      if (w["message"]["content"].is_null()) {
        EXPECT_EQ(msgs[i]["content"], "");
        EXPECT_FALSE(calls[i].empty());
      } else {
        EXPECT_EQ(msgs[i]["content"], w["message"]["content"]);
      }
      EXPECT_EQ(msgs[i]["reasoning_content"], w["message"].value("reasoning_content", ""));
      const Json wc = w["message"].value("tool_calls", Json::array());
      ASSERT_EQ(calls[i].size(), wc.size());
      for (size_t k = 0; k < wc.size(); ++k) {
        EXPECT_EQ(calls[i][k]["function"]["name"], wc[k]["function"]["name"]);
        EXPECT_EQ(calls[i][k]["function"]["arguments"], wc[k]["function"]["arguments"]);
      }
      if (!wc.empty() && i != 1) {
        EXPECT_EQ(w["finish_reason"], "tool_calls");
      }
    }
  }
}

TEST(ChatWriter, LogprobsCarryTokenTextAndBytes) {
  const auto ids = Tok().Encode("Hello é");
  ASSERT_TRUE(ids.ok());
  std::vector<LogProbs> lps;
  for (int32_t id : *ids) lps.push_back({id, -0.5f, {{id, -0.5f}, {id + 1, -2.0f}}});
  const Json j = ChatLogprobs(Tok(), lps);
  ASSERT_EQ(j.size(), ids->size());
  std::string bytes;
  for (const Json& e : j) {
    EXPECT_EQ(e["logprob"], -0.5);
    EXPECT_EQ(e["top_logprobs"].size(), 2u);
    for (int b : e["bytes"]) bytes += static_cast<char>(b);
  }
  EXPECT_EQ(bytes, Tok().Decode(*ids));  // the bytes spell the text
}

TEST(MessagesWriter, StreamFollowsTheEventGrammarAndEqualsTheWholeMessage) {
  for (int seed = 0; seed < 20; ++seed) {
    MessagesWriter stream("m", true, 30, 12), whole("m", false, 30, 12);
    std::string body = stream.Start();
    for (const auto& batch : ScriptFor(seed)) {
      body += stream.Events(batch);
      whole.Events(batch);
    }
    const std::string reason = seed % 3 == 0 ? "length" : "stop";
    const std::string stop_string = seed % 3 == 1 ? "END" : "";
    body += stream.Finish(reason, stop_string, 17);
    const Json want = Json::parse(whole.Finish(reason, stop_string, 17));

    const auto events = ParseSse(body);
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events[0].first, "message_start");
    EXPECT_EQ(events[0].second["message"]["usage"]["input_tokens"], 18);
    EXPECT_EQ(events[0].second["message"]["usage"]["cache_read_input_tokens"], 12);
    EXPECT_EQ(events[1].first, "ping");
    EXPECT_EQ(events[events.size() - 2].first, "message_delta");
    EXPECT_EQ(events.back().first, "message_stop");
    Json blocks = Json::array();
    int open = -1;
    for (size_t k = 2; k + 2 < events.size(); ++k) {
      const auto& [name, data] = events[k];
      EXPECT_EQ(data["type"], name);
      if (name == "content_block_start") {
        ASSERT_EQ(open, -1) << "a block opened inside another";
        open = data["index"];
        ASSERT_EQ(open, static_cast<int>(blocks.size())) << "indices count up from 0";
        Json b = data["content_block"];
        if (b["type"] == "tool_use") b["partial"] = "";
        blocks.push_back(b);
      } else if (name == "content_block_delta") {
        ASSERT_EQ(data["index"], open);
        const Json& d = data["delta"];
        Json& b = blocks[open];
        if (d["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
        else if (d["type"] == "thinking_delta") b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
        else if (d["type"] == "input_json_delta") b["partial"] = b["partial"].get<std::string>() + d["partial_json"].get<std::string>();
        else ADD_FAILURE() << d;
      } else if (name == "content_block_stop") {
        ASSERT_EQ(data["index"], open);
        open = -1;
      } else {
        ADD_FAILURE() << "unexpected event " << name;
      }
    }
    EXPECT_EQ(open, -1);
    ASSERT_EQ(blocks.size(), want["content"].size());
    for (size_t k = 0; k < blocks.size(); ++k) {
      const Json& w = want["content"][k];
      EXPECT_EQ(blocks[k]["type"], w["type"]);
      if (w["type"] == "text") {
        EXPECT_EQ(blocks[k]["text"], w["text"]);
      }
      if (w["type"] == "thinking") {
        EXPECT_EQ(blocks[k]["thinking"], w["thinking"]);
      }
      if (w["type"] == "tool_use") {
        EXPECT_EQ(blocks[k]["name"], w["name"]);
        EXPECT_EQ(Json::parse(blocks[k]["partial"].get<std::string>()), w["input"]);
      }
    }
    const Json& delta = events[events.size() - 2].second;
    EXPECT_EQ(delta["delta"]["stop_reason"], want["stop_reason"]);
    EXPECT_EQ(delta["delta"]["stop_sequence"], want["stop_sequence"]);
    EXPECT_EQ(delta["usage"]["output_tokens"], 17);
    bool calls = false;
    for (const Json& b : want["content"]) calls |= b["type"] == "tool_use";
    const std::string expect_reason =
        reason == "length" ? "max_tokens" : calls ? "tool_use" : stop_string.empty() ? "end_turn" : "stop_sequence";
    EXPECT_EQ(want["stop_reason"], expect_reason);
  }
}

}  // namespace
}  // namespace g4::server
