// Request parsing: the OpenAI and Anthropic bodies map onto the server's
// requests field by field, and every malformed body is refused with an
// error that names the offending field (never accepted, never a crash).
#include <gtest/gtest.h>

#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace g4::server {
namespace {

Json J(const char* text) { return Json::parse(text); }

TEST(OpenAiRequest, ChatFieldsMap) {
  auto r = ParseChatCompletionRequest(J(R"({
    "model": "m", "stream": true, "stream_options": {"include_usage": true},
    "max_completion_tokens": 33, "max_tokens": 99, "temperature": 0.5, "top_p": 0.9, "top_k": 7, "min_p": 0.05,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": -1,
    "stop": ["a", "bc"], "n": 3, "logprobs": true, "top_logprobs": 4, "logit_bias": {"17": -100, "3": 2.5},
    "chat_template_kwargs": {"enable_thinking": true},
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]},
      {"role": "assistant", "content": null, "reasoning_content": "hmm",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}],
    "tool_choice": "auto", "response_format": {"type": "text"}, "user": "ignored"})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GenerationRequest& g = r->gen;
  EXPECT_EQ(g.model, "m");
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
  EXPECT_EQ(g.max_tokens, 33);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(*g.sampling.overrides.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*g.sampling.overrides.top_p, 0.9f);
  EXPECT_EQ(*g.sampling.overrides.top_k, 7);
  EXPECT_FLOAT_EQ(*g.sampling.overrides.min_p, 0.05f);
  EXPECT_FLOAT_EQ(*g.sampling.overrides.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(g.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(*g.sampling.seed, ~uint64_t{0});
  EXPECT_EQ(g.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(g.n, 3);
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 4);
  EXPECT_EQ(g.sampling.logit_bias.at(17), -100.0f);
  EXPECT_EQ(g.sampling.logit_bias.at(3), 2.5f);
  EXPECT_TRUE(r->enable_thinking);
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[1].content, "hello");
  EXPECT_EQ(r->messages[2].reasoning, "hmm");
  ASSERT_EQ(r->messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments_json, "{\"x\":1}");
  EXPECT_EQ(r->messages[3].tool_call_id, "c1");
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(Json::parse(r->tools[0].parameters_json)["properties"]["x"]["type"], "integer");
}

TEST(OpenAiRequest, ToolChoiceNoneDropsTools) {
  auto r = ParseChatCompletionRequest(J(R"({"messages":[{"role":"user","content":"x"}],
    "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"})"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->tools.empty());
}

TEST(OpenAiRequest, CompletionPromptShapes) {
  for (const char* body : {R"({"prompt":"hi"})", R"({"prompt":["a","b"]})", R"({"prompt":[1,2,3]})",
                           R"({"prompt":[[1,2],[3]]})"}) {
    auto r = ParseCompletionRequest(J(body));
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().ToString();
  }
  auto r = ParseCompletionRequest(J(R"({"prompt":[[5,6],"x"],"echo":true,"logprobs":2,"n":2})"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->prompts.size(), 2u);
  EXPECT_TRUE(r->prompts[0].is_ids);
  EXPECT_EQ(r->prompts[0].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r->prompts[1].text, "x");
  EXPECT_TRUE(r->echo);
  EXPECT_EQ(r->gen.top_logprobs, 2);
}

struct Bad {
  const char* body;
  const char* mentions;  // the error names this
  bool unsupported = false;
};

TEST(OpenAiRequest, MalformedChatBodiesAreRefusedNamingTheField) {
  const Bad kBad[] = {
      {R"({})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[1]})", "messages[0]"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
       "image_url", true},
      {R"({"messages":[{"role":"user","content":[{"text":"x"}]}]})", "type"},
      // Elements of arrays are named by their path.
      {R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},"b"]}]})",
       "'messages[0].content[1]' must be an object"},
      {R"({"messages":[{"role":"user","content":"x"},{"role":"user","content":[{"type":"text"}]}]})",
       "'messages[1].content[0].text' is required"},
      {R"({"messages":[{"role":"user","content":[{"type":"input_audio"}]}]})", "at messages[0].content[0] is",
       true},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}},7]}]})",
       "'messages[0].tool_calls[1]' must be an object"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}},[]]})",
       "'tools[1]' must be an object"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", "tool_call_id"},
      {R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", "tool_calls"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{}}]}]})", "name"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":3})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-5})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1e30})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":0})", "'n'"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":1000})", "'n'"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[""]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})",
       "stream_options"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":50})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"abc":1}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":500}})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"seed":"x"})", "seed"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
       "response_format", true},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", "required", true},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function"}})", "tool_choice",
       true},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", "tools[0].function"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"code_interpreter"}]})",
       "code_interpreter", true},
      {R"({"messages":[{"role":"user","content":"x"}],"functions":[]})", "functions", true},
      {R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":"yes"}})",
       "enable_thinking"},
  };
  for (const Bad& b : kBad) {
    auto r = ParseChatCompletionRequest(J(b.body));
    ASSERT_FALSE(r.ok()) << b.body;
    EXPECT_EQ(r.status().code(), b.unsupported ? StatusCode::kUnsupported : StatusCode::kInvalidArgument) << b.body;
    EXPECT_NE(r.status().message().find(b.mentions), std::string::npos) << b.body << " -> " << r.status().message();
    EXPECT_EQ(ApiError::FromStatus(r.status()).http_status, 400);
  }
}

TEST(OpenAiRequest, MalformedCompletionBodiesAreRefused) {
  for (const char* body : {R"({})", R"({"prompt":5})", R"({"prompt":[]})", R"({"prompt":[1,"a"]})",
                           R"({"prompt":[[1,-2]]})", R"({"prompt":"x","suffix":"y"})", R"({"prompt":"x","best_of":3})",
                           R"({"prompt":"x","logprobs":9})", R"({"prompt":"x","echo":1})"}) {
    auto r = ParseCompletionRequest(J(body));
    EXPECT_FALSE(r.ok()) << body;
  }
}

TEST(JsonBody, NonObjectsAndDeepNestingAreRefused) {
  for (const char* body : {"", "nope", "[1,2]", "\"s\"", "{\"a\":", "{\"a\":1}x", "{\"a\":1,\"a\":2}"}) {
    auto r = ParseObject(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  std::string deep(100000, '[');
  EXPECT_FALSE(ParseObject("{\"a\":" + deep + "}").ok());
  EXPECT_TRUE(ParseObject("{\"a\":[[[[1]]]]}").ok());
}

TEST(AnthropicRequest, BlocksMapOntoChatMessages) {
  auto r = ParseMessagesRequest(J(R"({
    "model": "m", "max_tokens": 50, "system": [{"type":"text","text":"be brief"}],
    "stop_sequences": ["END"], "temperature": 0.2, "top_k": 5, "stream": true,
    "thinking": {"type": "enabled", "budget_tokens": 2000},
    "tools": [{"name": "get_weather", "description": "w", "input_schema": {"type":"object"}}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "need tool", "signature": "s"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type":"text","text":"18C"}]},
        {"type": "text", "text": "Thanks"}]}]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gen.max_tokens, 50);
  EXPECT_EQ(r->gen.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r->gen.stream);
  EXPECT_TRUE(r->enable_thinking);
  ASSERT_EQ(r->messages.size(), 5u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[0].content, "be brief");
  EXPECT_EQ(r->messages[2].reasoning, "need tool");
  EXPECT_EQ(r->messages[2].content, "Checking.");
  ASSERT_EQ(r->messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(Json::parse(r->messages[2].tool_calls[0].arguments_json)["city"], "Paris");
  EXPECT_EQ(r->messages[3].role, "tool");
  EXPECT_EQ(r->messages[3].tool_call_id, "tu1");
  EXPECT_EQ(r->messages[3].name, "get_weather");
  EXPECT_EQ(r->messages[3].content, "18C");
  EXPECT_EQ(r->messages[4].content, "Thanks");
  EXPECT_FALSE(r->continue_last);
  ASSERT_EQ(r->tools.size(), 1u);
}

TEST(AnthropicRequest, FinalAssistantMessageIsContinued) {
  auto r = ParseMessagesRequest(J(R"({"model":"m","max_tokens":5,"messages":[
    {"role":"user","content":"Say hi"},{"role":"assistant","content":"Hi,"}]})"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->continue_last);
}

TEST(AnthropicRequest, MalformedBodiesAreRefused) {
  const Bad kBad[] = {
      {R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}]})", "model"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":5,"messages":[]})", "messages"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]})", "role"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user"}]})", "content"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
       "image", true},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b"}]}]})",
       "tool_use"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"temperature":1.5})",
       "temperature"},
      // Elements of arrays are named by their path.
      {R"({"model":"m","max_tokens":5,"system":[{"type":"text","text":"a"},1],"messages":[{"role":"user","content":"x"}]})",
       "'system[1]' must be a text block"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},2]})",
       "'messages[1]' must be an object"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},null]}]})",
       "'messages[0].content[1]' must be an object"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":["r"]}]}]})",
       "'messages[0].content[0].content[0]' must be an object"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":["f"]})",
       "'tools[0]' must be an object"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop_sequences":"END"})",
       "stop_sequences"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}]})",
       "input_schema"},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"w"}]})",
       "server tool", true},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"any"}})",
       "any", true},
      {R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"sometimes"}})",
       "thinking.type"},
  };
  for (const Bad& b : kBad) {
    auto r = ParseMessagesRequest(J(b.body));
    ASSERT_FALSE(r.ok()) << b.body;
    EXPECT_EQ(r.status().code(), b.unsupported ? StatusCode::kUnsupported : StatusCode::kInvalidArgument) << b.body;
    EXPECT_NE(r.status().message().find(b.mentions), std::string::npos) << b.body << " -> " << r.status().message();
  }
  // count_tokens needs no max_tokens.
  EXPECT_TRUE(ParseMessagesRequest(J(R"({"model":"m","messages":[{"role":"user","content":"x"}]})"), true).ok());
}

TEST(ApiErrorShape, OpenAiAndAnthropic) {
  const ApiError e{429, "slow down", "n"};
  const Json o = Json::parse(ErrorBody(e, ApiFlavor::kOpenAi));
  EXPECT_EQ(o["error"]["message"], "slow down");
  EXPECT_EQ(o["error"]["type"], "rate_limit_error");
  EXPECT_EQ(o["error"]["param"], "n");
  EXPECT_EQ(o["error"]["code"], "rate_limit_exceeded");
  const Json a = Json::parse(ErrorBody(e, ApiFlavor::kAnthropic));
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "rate_limit_error");
  EXPECT_EQ(a["error"]["message"], "slow down");
  EXPECT_EQ(ApiError::FromStatus(InvalidArgument("[request] 'x' bad")).message, "'x' bad");
  EXPECT_EQ(ApiError::FromStatus(Internal("[model] boom")).http_status, 500);
}

}  // namespace
}  // namespace g4::server
