// The HTTP server in process, on the demo model: a battery of bad requests
// gets 4xx JSON errors in each API's shape and leaves the server healthy;
// the API key guards everything but / and /health; a streamed answer equals
// the whole one; a client that goes away mid-stream frees its blocks; a
// full queue answers 429; what can never fit is refused before any work;
// multi-turn chat reports cached prompt tokens.
#include <gtest/gtest.h>

#include "server_test_util.h"

namespace g4::server {
namespace {

using testing::Call;
using testing::Eventually;
using testing::MetricValue;
using testing::RawStream;
using testing::Reply;
using testing::TestServer;
using testing::TestServerOptions;

// The demo model's end-of-text ids banned: an answer runs to max_tokens.
constexpr const char* kNoEnd = R"("logit_bias":{"1":-100,"6":-100})";

std::string Chat(const std::string& user, int max_tokens, bool stream = false, const std::string& extra = "") {
  Json j = {{"model", "demo"},
            {"messages", Json::array({{{"role", "user"}, {"content", user}}})},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"stream", stream}};
  std::string s = Dump(j);
  if (!extra.empty()) s = s.substr(0, s.size() - 1) + "," + extra + "}";
  return s;
}

// The text of an OpenAI chat stream.
std::string StreamedText(const std::string& sse, std::string* finish = nullptr) {
  std::string text;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string data = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    const Json c = Json::parse(data);
    for (const Json& ch : c["choices"]) {
      if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
      if (finish && !ch["finish_reason"].is_null()) *finish = ch["finish_reason"];
    }
  }
  return text;
}

TEST(Server, BadRequestsGet4xxJsonErrorsAndTheServerStaysHealthy) {
  TestServerOptions o;
  o.server.max_body_bytes = 64 * 1024;
  TestServer s(o);
  struct Case {
    std::string method, path, body;
    int status;
    bool anthropic;
  };
  const std::string big(100 * 1024, 'x');
  const std::vector<Case> cases = {
      {"POST", "/v1/chat/completions", "", 400, false},
      {"POST", "/v1/chat/completions", "{not json", 400, false},
      {"POST", "/v1/chat/completions", "[1,2,3]", 400, false},
      {"POST", "/v1/chat/completions", R"({"messages":[]})", 400, false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"wizard","content":"x"}]})", 400, false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})", 400, false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"9"})", 400, false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":100000000})", 400,
       false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"999999":5}})",
       400, false},
      {"POST", "/v1/chat/completions",
       R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})", 400, false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"tool","content":"x","tool_call_id":"nope"}]})", 400,
       false},
      {"POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"},{"role":"system","content":"late"}]})",
       400, false},
      {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"" + big + "\"}]}", 413, false},
      {"POST", "/v1/completions", R"({"prompt":[1,2,99999]})", 400, false},
      {"POST", "/v1/completions", R"({"prompt":{}})", 400, false},
      {"POST", "/v1/completions", R"({"prompt":"x","max_tokens":0})", 400, false},
      {"GET", "/v1/nothing", "", 404, false},
      {"GET", "/v1/models/other", "", 404, false},
      {"POST", "/v1/messages", R"({"model":"m","messages":[{"role":"user","content":"x"}]})", 400, true},
      {"POST", "/v1/messages", R"({"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]})", 400,
       true},
      {"POST", "/v1/messages", "\xff\xfe", 400, true},
      {"POST", "/v1/messages/count_tokens", R"({"messages":"x"})", 400, true},
  };
  for (const Case& c : cases) {
    const Reply r = Call(s.port(), c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.substr(0, 200) << " -> " << r.body;
    const Json j = r.json();
    ASSERT_TRUE(j.is_object()) << r.body;
    if (c.anthropic) {
      EXPECT_EQ(j["type"], "error") << r.body;
      EXPECT_TRUE(j["error"]["type"].is_string() && j["error"]["message"].is_string()) << r.body;
    } else {
      EXPECT_TRUE(j["error"]["message"].is_string() && j["error"]["type"].is_string()) << r.body;
    }
    EXPECT_EQ(Call(s.port(), "GET", "/health").status, 200);
  }
  // Still serving.
  const Reply ok = Call(s.port(), "POST", "/v1/chat/completions", Chat("Hello", 4));
  EXPECT_EQ(ok.status, 200) << ok.body;
  // The step loop retires a finished job after its reply may have gone out.
  EXPECT_TRUE(Eventually([&] { return MetricValue(s.port(), "g4_requests_in_flight") == 0; }));
}

TEST(Server, TheApiKeyGuardsEverythingButThePageAndHealth) {
  TestServerOptions o;
  o.server.api_key = "s3cret-key";
  TestServer s(o);
  EXPECT_EQ(Call(s.port(), "GET", "/health").status, 200);
  EXPECT_EQ(Call(s.port(), "GET", "/").status, 200);
  EXPECT_EQ(Call(s.port(), "GET", "/v1/models").status, 401);
  EXPECT_EQ(Call(s.port(), "GET", "/metrics").status, 401);
  EXPECT_EQ(Call(s.port(), "GET", "/v1/models", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(Call(s.port(), "GET", "/v1/models", "", {{"Authorization", "Bearer s3cret-key"}}).status, 200);
  EXPECT_EQ(Call(s.port(), "GET", "/v1/models", "", {{"x-api-key", "s3cret-key"}}).status, 200);
  EXPECT_EQ(Call(s.port(), "GET", "/v1/models", "", {{"x-api-key", "s3cret-ke"}}).status, 401);
  const Reply a = Call(s.port(), "POST", "/v1/messages", "{}", {{"x-api-key", "nope"}});
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(a.json()["error"]["type"], "authentication_error");
  const Reply b = Call(s.port(), "POST", "/v1/chat/completions", "{}");
  EXPECT_EQ(b.json()["error"]["code"], "invalid_api_key");
}

TEST(Server, StreamedTextEqualsTheWholeAnswer) {
  TestServer s;
  for (const char* q : {"What is a Python dictionary?", "Name a sorting algorithm."}) {
    const Reply whole = Call(s.port(), "POST", "/v1/chat/completions", Chat(q, 24));
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Reply stream = Call(s.port(), "POST", "/v1/chat/completions", Chat(q, 24, true));
    ASSERT_EQ(stream.status, 200);
    EXPECT_EQ(stream.content_type, "text/event-stream");
    std::string finish;
    EXPECT_EQ(StreamedText(stream.body, &finish), whole.json()["choices"][0]["message"]["content"]);
    EXPECT_EQ(finish, whole.json()["choices"][0]["finish_reason"]);
    EXPECT_EQ(stream.body.substr(stream.body.size() - 14), "data: [DONE]\n\n");
  }
}

TEST(Server, AClientThatGoesAwayIsCancelledAndItsBlocksFreed) {
  TestServerOptions o;
  o.cache_bytes = 0;  // nothing else holds blocks
  TestServer s(o);
  EXPECT_EQ(s.pool().used_bytes(), 0u);
  for (bool stream : {true, false}) {
    {
      RawStream r(s.port(), "/v1/chat/completions", Chat("Tell me a long story.", 4000, stream, kNoEnd));
      ASSERT_TRUE(Eventually([&] { return MetricValue(s.port(), "g4_running_sequences") == 1; }));
      if (stream) {
        ASSERT_TRUE(r.ReadUntil("\"content\":\" "));
      }
      EXPECT_GT(MetricValue(s.port(), "g4_kv_blocks_used{group=\"full\",store=\"0\"}"), 0);
    }  // closed
    EXPECT_TRUE(Eventually([&] {
      return MetricValue(s.port(), "g4_running_sequences") == 0 &&
             MetricValue(s.port(), "g4_kv_blocks_used{group=\"full\",store=\"0\"}") == 0 &&
             MetricValue(s.port(), "g4_kv_blocks_used{group=\"sliding\",store=\"0\"}") == 0;
    })) << "stream " << stream;
    EXPECT_LT(MetricValue(s.port(), "g4_generation_tokens_total"), 4000);
  }
}

TEST(Server, AFullQueueAnswers429) {
  TestServerOptions o;
  o.max_seqs = 1;
  o.server.max_queue = 0;
  TestServer s(o);
  RawStream r(s.port(), "/v1/chat/completions", Chat("Tell me a long story.", 4000, true, kNoEnd));
  ASSERT_TRUE(r.ReadUntil("\"content\""));
  const Reply busy = Call(s.port(), "POST", "/v1/chat/completions", Chat("Hi", 4));
  EXPECT_EQ(busy.status, 429);
  EXPECT_EQ(busy.json()["error"]["type"], "rate_limit_error");
  const Reply busy2 = Call(s.port(), "POST", "/v1/messages",
                           R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]})");
  EXPECT_EQ(busy2.status, 429);
  EXPECT_EQ(busy2.json()["error"]["type"], "rate_limit_error");
  r.Close();
  EXPECT_TRUE(Eventually([&] { return Call(s.port(), "POST", "/v1/chat/completions", Chat("Hi", 4)).status == 200; }));
}

TEST(Server, WhatCanNeverFitIsRefusedBeforeAnyWork) {
  TestServerOptions o;
  o.kv_bytes = size_t{8} << 20;  // a few thousand tokens
  o.cache_bytes = 0;
  TestServer s(o);
  const Reply r = Call(s.port(), "POST", "/v1/chat/completions", Chat("Hi", 30000));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("never fit"), std::string::npos) << r.body;
  EXPECT_EQ(MetricValue(s.port(), "g4_steps_total"), 0);
  EXPECT_EQ(Call(s.port(), "POST", "/v1/chat/completions", Chat("Hi", 8)).status, 200);
}

TEST(Server, ASecondTurnReportsCachedPromptTokens) {
  TestServer s;
  const Reply first = Call(s.port(), "POST", "/v1/chat/completions", Chat("What is a Python dictionary?", 20));
  ASSERT_EQ(first.status, 200);
  const std::string answer = first.json()["choices"][0]["message"]["content"];
  Json turn2 = {{"model", "demo"},
                {"max_tokens", 8},
                {"temperature", 0},
                {"messages", Json::array({{{"role", "user"}, {"content", "What is a Python dictionary?"}},
                                          {{"role", "assistant"}, {"content", answer}},
                                          {{"role", "user"}, {"content", "And a list?"}}})}};
  const Reply second = Call(s.port(), "POST", "/v1/chat/completions", Dump(turn2));
  ASSERT_EQ(second.status, 200);
  const Json u = second.json()["usage"];
  const int cached = u["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, first.json()["usage"]["prompt_tokens"].get<int>()) << u;
  // The reused prefix changes nothing: the same request on a fresh server
  // gives the same text.
  TestServerOptions cold;
  cold.cache_bytes = 0;
  TestServer fresh(cold);
  const Reply again = Call(fresh.port(), "POST", "/v1/chat/completions", Dump(turn2));
  EXPECT_EQ(again.json()["choices"][0]["message"]["content"], second.json()["choices"][0]["message"]["content"]);
  EXPECT_EQ(again.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(Server, ChoicesOfOneRequestShareThePrompt) {
  TestServer s;
  const std::string body =
      Chat("You are a helpful assistant who explains programming concepts. What is a Python dictionary?", 12, false,
           R"("n":3,"logit_bias":{"1":-100,"6":-100})");  // no end-of-text: each choice runs to 12
  const Reply r = Call(s.port(), "POST", "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["message"]["content"], j["choices"][0]["message"]["content"]);  // greedy
  }
  EXPECT_EQ(j["usage"]["completion_tokens"].get<int>(), 36);
}

TEST(Server, CompletionsAnthropicAndCountTokens) {
  TestServer s;
  const Reply c = Call(s.port(), "POST", "/v1/completions",
                       R"({"prompt":"The capital of France","max_tokens":6,"temperature":0,"logprobs":2,"echo":true})");
  ASSERT_EQ(c.status, 200) << c.body;
  const Json cj = c.json();
  EXPECT_EQ(cj["object"], "text_completion");
  EXPECT_EQ(cj["choices"][0]["text"].get<std::string>().rfind("The capital of France", 0), 0u);
  EXPECT_EQ(cj["choices"][0]["logprobs"]["tokens"].size(), 6u);
  EXPECT_EQ(cj["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);

  const std::string msg = R"({"model":"demo","max_tokens":10,"temperature":0,"system":"Be brief.",
                              "messages":[{"role":"user","content":"What is a list?"}]})";
  const Reply m = Call(s.port(), "POST", "/v1/messages", msg);
  ASSERT_EQ(m.status, 200) << m.body;
  const Json mj = m.json();
  EXPECT_EQ(mj["type"], "message");
  EXPECT_EQ(mj["role"], "assistant");
  ASSERT_EQ(mj["content"][0]["type"], "text");
  EXPECT_EQ(mj["stop_reason"], "max_tokens");
  EXPECT_EQ(mj["usage"]["output_tokens"], 10);
  const Reply n = Call(s.port(), "POST", "/v1/messages/count_tokens", msg);
  ASSERT_EQ(n.status, 200);
  EXPECT_EQ(n.json()["input_tokens"].get<int>(),
            mj["usage"]["input_tokens"].get<int>() + mj["usage"]["cache_read_input_tokens"].get<int>());
}

TEST(Server, StopStringsAreNeverShownAndEndTheAnswer) {
  TestServer s;
  const Reply free_run = Call(s.port(), "POST", "/v1/chat/completions", Chat("What is a Python dictionary?", 30));
  const std::string text = free_run.json()["choices"][0]["message"]["content"];
  ASSERT_GT(text.size(), 12u);
  const std::string stop = text.substr(8, 4);
  const Reply r = Call(s.port(), "POST", "/v1/chat/completions",
                       Chat("What is a Python dictionary?", 30, false, "\"stop\":[" + Dump(stop) + "]"));
  const Json j = r.json();
  EXPECT_EQ(j["choices"][0]["message"]["content"], text.substr(0, text.find(stop)));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const Reply a = Call(s.port(), "POST", "/v1/messages",
                       Dump({{"model", "demo"},
                             {"max_tokens", 30},
                             {"temperature", 0},
                             {"stop_sequences", {stop}},
                             {"messages", Json::array({{{"role", "user"}, {"content", "What is a Python dictionary?"}}})}}));
  EXPECT_EQ(a.json()["stop_reason"], "stop_sequence");
  EXPECT_EQ(a.json()["stop_sequence"], stop);
}

}  // namespace
}  // namespace g4::server
