// Chat format tests. Expected renders come from outside g4: the two 12B
// goldens of the spec (gemma4-architecture.md 6.3, produced by the real
// template and tokenizer) and renders of the released Jinja template recorded
// by other implementations (tool declarations, a tool round trip).
#include "tokenizer/chat_format.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace g4 {
namespace {

ChatMessage Msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

ChatOptions LargeModel() {
  ChatOptions o;
  o.empty_thought_channel = true;
  return o;
}

constexpr char kGolden1[] =
    "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
constexpr char kGolden2[] =
    "<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello.<turn|>\n"
    "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";

std::vector<ChatMessage> Golden2Messages() {
  return {Msg("system", "You are terse."), Msg("user", "Hi"), Msg("assistant", "Hello."), Msg("user", "Bye")};
}

TEST(ChatFormatTest, SpecGoldenSingleUser) {
  auto r = RenderChat({Msg("user", "What is 2+2?")}, LargeModel());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kGolden1);
}

TEST(ChatFormatTest, SpecGoldenMultiTurnWithSystem) {
  auto r = RenderChat(Golden2Messages(), LargeModel());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, kGolden2);
}

TEST(ChatFormatTest, SmallModelsEndWithBareOpener) {
  auto r = RenderChat({Msg("user", "What is 2+2?")}, ChatOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n");
}

TEST(ChatFormatTest, NoGenerationPrompt) {
  ChatOptions o = LargeModel();
  o.add_generation_prompt = false;
  auto r = RenderChat({Msg("user", "Hi")}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>user\nHi<turn|>\n");
}

TEST(ChatFormatTest, ThinkingOpensSystemTurnAndSkipsEmptyChannel) {
  ChatOptions o = LargeModel();
  o.enable_thinking = true;
  auto r = RenderChat({Msg("user", "Hi")}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  auto s = RenderChat({Msg("developer", "  Be brief.\n"), Msg("user", "Hi")}, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
}

TEST(ChatFormatTest, ContentTrimmedLikePythonStrip) {
  // U+3000 (ideographic space) and U+00A0 are whitespace to str.strip().
  auto r = RenderChat({Msg("user", "\xE3\x80\x80 \n\tHi there\xC2\xA0\r\n")}, ChatOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>user\nHi there<turn|>\n<|turn>model\n");
}

TEST(ChatFormatTest, ModelRoleAliasAndReasoningStripped) {
  std::vector<ChatMessage> msgs = {Msg("user", "Q1"),
                                   Msg("model", "<|channel>thought\nlet me think<channel|>A1"),
                                   Msg("user", "Q2")};
  auto r = RenderChat(msgs, ChatOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>user\nQ1<turn|>\n<|turn>model\nA1<turn|>\n<|turn>user\nQ2<turn|>\n<|turn>model\n");
}

TEST(ChatFormatTest, ContentIsVerbatimEvenWithControlTokens) {
  auto r = RenderChat({Msg("user", "say <|turn> please")}, ChatOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>user\nsay <|turn> please<turn|>\n<|turn>model\n");
}

ToolDefinition SearchTool() {
  ToolDefinition t;
  t.name = "search";
  t.description = "Search the web";
  t.parameters_json = R"({"type":"object","properties":{
      "query":{"type":"string","description":"the query"},
      "count":{"type":"integer","description":"how many"},
      "safe":{"type":"boolean","description":"safe search"},
      "sort":{"type":"string","description":"sort order","enum":["relevance","date"]},
      "tags":{"type":"array","description":"tags","items":{"type":"string"}}},
      "required":["query"]})";
  return t;
}

TEST(ChatFormatTest, ToolDeclarationMatchesTemplateOracle) {
  ChatOptions o;
  o.tools = {SearchTool()};
  auto r = RenderChat({Msg("user", "x")}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string decl =
      "<|tool>declaration:search{description:<|\"|>Search the web<|\"|>,parameters:{properties:{count:{"
      "description:<|\"|>how many<|\"|>,type:<|\"|>INTEGER<|\"|>},query:{description:<|\"|>the query<|\"|>,"
      "type:<|\"|>STRING<|\"|>},safe:{description:<|\"|>safe search<|\"|>,type:<|\"|>BOOLEAN<|\"|>},sort:{"
      "description:<|\"|>sort order<|\"|>,enum:[<|\"|>relevance<|\"|>,<|\"|>date<|\"|>],type:<|\"|>STRING<|\"|>},"
      "tags:{description:<|\"|>tags<|\"|>,items:{type:<|\"|>STRING<|\"|>},type:<|\"|>ARRAY<|\"|>}},required:[<|"
      "\"|>query<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|>";
  EXPECT_EQ(*r, "<bos><|turn>system\n" + decl + "<turn|>\n<|turn>user\nx<turn|>\n<|turn>model\n");
}

ToolDefinition ListDirTool() {
  ToolDefinition t;
  t.name = "list_dir";
  t.description = "Lists all files and subdirectories in a specified directory path";
  t.parameters_json = R"json({"type":"object","properties":{
      "path":{"type":"string","description":"The absolute path to the directory to list (e.g., /tmp)"}},
      "required":["path"]})json";
  return t;
}

constexpr char kListDirSystem[] =
    "<bos><|turn>system\n<|tool>declaration:list_dir{description:<|\"|>Lists all files and subdirectories in a "
    "specified directory path<|\"|>,parameters:{properties:{path:{description:<|\"|>The absolute path to the "
    "directory to list (e.g., /tmp)<|\"|>,type:<|\"|>STRING<|\"|>}},required:[<|\"|>path<|\"|>],type:<|\"|>"
    "OBJECT<|\"|>}}<tool|><turn|>\n";

TEST(ChatFormatTest, ToolsPlusUserMatchesTemplateOracle) {
  ChatOptions o = LargeModel();
  o.tools = {ListDirTool()};
  auto r = RenderChat({Msg("user", "List files in /tmp")}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::string(kListDirSystem) +
                    "<|turn>user\nList files in /tmp<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(ChatFormatTest, ToolCallAndResponseContinueTheModelTurn) {
  ChatOptions o = LargeModel();
  o.tools = {ListDirTool()};
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {{"c1", "list_dir", R"({"path":"/tmp"})"}};
  ChatMessage result = Msg("tool", "a.txt\nb.txt");
  result.tool_call_id = "c1";
  auto r = RenderChat({Msg("user", "List files in /tmp"), call, result}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::string(kListDirSystem) +
                    "<|turn>user\nList files in /tmp<turn|>\n<|turn>model\n<|tool_call>call:list_dir{path:<|\"|>/tmp"
                    "<|\"|>}<tool_call|><|tool_response>response:list_dir{value:<|\"|>a.txt\nb.txt<|\"|>}"
                    "<tool_response|>");

  // The final answer continues the same model turn (no second opener).
  auto r2 = RenderChat({Msg("user", "List files in /tmp"), call, result, Msg("assistant", "Two files.")}, o);
  ASSERT_TRUE(r2.ok());
  const std::string tail = "<tool_response|>Two files.<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
  EXPECT_TRUE(r2->ends_with(tail)) << *r2;
  EXPECT_EQ(r2->find("<|turn>model\n"), r2->rfind("<|turn>model\n", r2->size() - tail.size()));
}

TEST(ChatFormatTest, PendingToolCallHandsOverToTool) {
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {{"", "ping", ""}};
  auto r = RenderChat({Msg("user", "go"), call}, ChatOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<bos><|turn>user\ngo<turn|>\n<|turn>model\n<|tool_call>call:ping{}<tool_call|><|tool_response>");
}

TEST(ChatFormatTest, ToolCallArgumentSyntax) {
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {{"", "f",
                      R"({"zeta":1,"Alpha":"x","beta":{"b":true,"A":[1,2.5,"s",null,{"k":false}]},"mid":-3})"}};
  auto r = RenderChat({Msg("user", "go"), call}, ChatOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // dictsort is case-insensitive; keys stay bare; nested maps keep bare keys
  // (escape_keys=False); null prints as Python's None.
  EXPECT_NE(r->find("<|tool_call>call:f{Alpha:<|\"|>x<|\"|>,beta:{A:[1,2.5,<|\"|>s<|\"|>,None,{k:false}],b:true},"
                    "mid:-3,zeta:1}<tool_call|>"),
            std::string::npos)
      << *r;
}

TEST(ChatFormatTest, ReasoningKeptOnlyForToolCallingTurnAfterLastUser) {
  ChatMessage call = Msg("assistant", "");
  call.reasoning = "need the weather";
  call.tool_calls = {{"1", "weather", R"({"city":"Paris"})"}};
  ChatMessage result = Msg("tool", "sunny");
  result.tool_call_id = "1";
  auto r = RenderChat({Msg("user", "Weather?"), call, result}, ChatOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r,
            "<bos><|turn>user\nWeather?<turn|>\n<|turn>model\n<|channel>thought\nneed the weather\n<channel|>"
            "<|tool_call>call:weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>response:weather{value:"
            "<|\"|>sunny<|\"|>}<tool_response|>");
  // Before a later user message, the reasoning is dropped.
  auto r2 = RenderChat({Msg("user", "Weather?"), call, result, Msg("assistant", "Sunny."), Msg("user", "Thanks")},
                       ChatOptions{});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->find("need the weather"), std::string::npos);
}

TEST(ChatFormatTest, ToolResponseNamedByIdThenByName) {
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {{"a", "first", ""}, {"b", "second", ""}};
  ChatMessage r1 = Msg("tool", "1");
  r1.tool_call_id = "b";
  ChatMessage r2 = Msg("tool", "2");
  r2.name = "first";
  auto r = RenderChat({Msg("user", "go"), call, r1, r2}, ChatOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find("<|tool_response>response:second{value:<|\"|>1<|\"|>}<tool_response|><|tool_response>response:"
                    "first{value:<|\"|>2<|\"|>}<tool_response|>"),
            std::string::npos)
      << *r;
}

void ExpectInvalid(const std::vector<ChatMessage>& msgs, const ChatOptions& o, const std::string& needle) {
  auto r = RenderChat(msgs, o);
  ASSERT_FALSE(r.ok()) << "rendered: " << *r;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(ChatFormatTest, Errors) {
  ExpectInvalid({}, ChatOptions{}, "no messages");
  ExpectInvalid({Msg("narrator", "x")}, ChatOptions{}, "unknown role \"narrator\"");
  ExpectInvalid({Msg("user", "x"), Msg("system", "y")}, ChatOptions{}, "messages[1]");
  ExpectInvalid({Msg("user", "x"), Msg("tool", "y")}, ChatOptions{}, "does not follow");
  ChatMessage user_call = Msg("user", "x");
  user_call.tool_calls = {{"", "f", ""}};
  ExpectInvalid({user_call}, ChatOptions{}, "only assistant");
  ChatMessage bad_name = Msg("assistant", "");
  bad_name.tool_calls = {{"", "evil<|turn>", ""}};
  ExpectInvalid({Msg("user", "x"), bad_name}, ChatOptions{}, "\"<|\"");
  ChatMessage bad_args = Msg("assistant", "");
  bad_args.tool_calls = {{"", "f", "[1,2]"}};
  ExpectInvalid({Msg("user", "x"), bad_args}, ChatOptions{}, "must be a JSON object");
  bad_args.tool_calls = {{"", "f", "{not json"}};
  ExpectInvalid({Msg("user", "x"), bad_args}, ChatOptions{}, "not valid JSON");
  bad_args.tool_calls = {{"", "f", R"({"a:b":1})"}};
  ExpectInvalid({Msg("user", "x"), bad_args}, ChatOptions{}, "\"a:b\"");
  std::string deep = std::string(200, '[') + std::string(200, ']');
  bad_args.tool_calls = {{"", "f", "{\"a\":" + deep + "}"}};
  ExpectInvalid({Msg("user", "x"), bad_args}, ChatOptions{}, "nested deeper");
  ChatOptions tools;
  tools.tools = {{"my tool", "d", ""}};
  ExpectInvalid({Msg("user", "x")}, tools, "whitespace");
  tools.tools = {{"t", "d", "\"str\""}};
  ExpectInvalid({Msg("user", "x")}, tools, "tools[0].parameters");
}

TEST(ChatFormatTest, DetectsTemplateFlavour) {
  EXPECT_TRUE(TemplateClosesThoughtChannel(
      "{{- '<|turn>model\\n' -}}{%- if not enable_thinking | default(false) -%}{{- '<|channel>thought\\n<channel|>' "
      "-}}{%- endif -%}"));
  EXPECT_FALSE(TemplateClosesThoughtChannel("{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- endif -%}"));
}

// ---- Token ids: the rendered text through the real Gemma 4 tokenizer ----

class ChatIdsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Tokenizer::Load(testing::TestDataPath("tokenizer/tokenizer.json"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokenizer_ = new Tokenizer(std::move(t).value());
  }
  static std::vector<int32_t> Encode(const std::vector<ChatMessage>& msgs, const ChatOptions& o) {
    auto text = RenderChat(msgs, o);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    if (!text.ok()) return {};
    auto ids = tokenizer_->Encode(*text);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }
  static Tokenizer* tokenizer_;
};
Tokenizer* ChatIdsTest::tokenizer_ = nullptr;

TEST_F(ChatIdsTest, SpecGoldenSingleUser) {
  EXPECT_EQ(Encode({Msg("user", "What is 2+2?")}, LargeModel()),
            (std::vector<int32_t>{2, 105, 2364, 107, 3689, 563, 236743, 236778, 236862, 236778, 236881, 106, 107, 105,
                                  4368, 107, 100, 45518, 107, 101}));
}

TEST_F(ChatIdsTest, SpecGoldenMultiTurnWithSystem) {
  EXPECT_EQ(Encode(Golden2Messages(), LargeModel()),
            (std::vector<int32_t>{2,   105,    9731,   107, 3048,  659, 17514, 236761, 106,  107, 105, 2364,
                                  107, 10979,  106,    107, 105,   4368, 107,  9259,   236761, 106, 107, 105,
                                  2364, 107,   98874,  106, 107,   105,  4368, 107,    100,  45518, 107, 101}));
}

TEST_F(ChatIdsTest, SmallModelPromptEndsWithModelOpener) {
  std::vector<int32_t> ids = Encode({Msg("user", "What is 2+2?")}, ChatOptions{});
  ASSERT_GE(ids.size(), 9u);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 4), (std::vector<int32_t>{2, 105, 2364, 107}));
  EXPECT_EQ(std::vector<int32_t>(ids.end() - 5, ids.end()), (std::vector<int32_t>{106, 107, 105, 4368, 107}));
}

TEST_F(ChatIdsTest, MarkupBecomesSingleControlTokens) {
  ChatOptions o;
  o.enable_thinking = true;
  o.tools = {ListDirTool()};
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {{"c1", "list_dir", R"({"path":"/tmp"})"}};
  ChatMessage result = Msg("tool", "a.txt");
  result.tool_call_id = "c1";
  std::vector<int32_t> ids = Encode({Msg("user", "List"), call, result}, o);
  auto count = [&](int32_t id) { return std::count(ids.begin(), ids.end(), id); };
  EXPECT_EQ(count(98), 1);  // <|think|>
  EXPECT_EQ(count(46), 1);  // <|tool>
  EXPECT_EQ(count(47), 1);  // <tool|>
  EXPECT_EQ(count(48), 1);  // <|tool_call>
  EXPECT_EQ(count(49), 1);  // <tool_call|>
  EXPECT_EQ(count(50), 1);  // <|tool_response>
  EXPECT_EQ(count(51), 1);  // <tool_response|>
  // <|"|> around the description, the property description, "STRING",
  // "path" in required, "OBJECT", the argument and the response value.
  EXPECT_EQ(count(52), 14);
  EXPECT_EQ(ids.back(), 51);  // the model continues after the tool result
}

// ---- Output parsing ----

TEST(ChatOutputTest, SplitReasoning) {
  ReasoningSplit s = SplitReasoning("<|channel>thought\nStep 1. Step 2.<channel|>The answer is 4.");
  EXPECT_EQ(s.reasoning, "Step 1. Step 2.");
  EXPECT_EQ(s.answer, "The answer is 4.");

  s = SplitReasoning("Plain answer.");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.answer, "Plain answer.");

  s = SplitReasoning("<|channel>thought\nunfinished");
  EXPECT_EQ(s.reasoning, "unfinished");
  EXPECT_EQ(s.answer, "");

  s = SplitReasoning("already inside<channel|>answer");  // the prompt opened the channel
  EXPECT_EQ(s.reasoning, "already inside");
  EXPECT_EQ(s.answer, "answer");

  s = SplitReasoning("a<|channel>thought\nr1<channel|>b<|channel>thought\nr2<channel|>c");
  EXPECT_EQ(s.reasoning, "r1\nr2");
  EXPECT_EQ(s.answer, "abc");
}

TEST(ChatOutputTest, ParseToolCalls) {
  ParsedToolCalls p = ParseToolCalls(
      "Let me check.<|tool_call>call:edit{path:<|\"|>/tmp/x.rs<|\"|>,old:<|\"|>for a in b {<|\"|>,n:5,f:-2.5,"
      "ok:true,none:null,list:[1,<|\"|>two<|\"|>,{k:false}]}<tool_call|>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "edit");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments_json),
            nlohmann::json::parse(R"({"path":"/tmp/x.rs","old":"for a in b {","n":5,"f":-2.5,"ok":true,
                                       "none":null,"list":[1,"two",{"k":false}]})"));
  EXPECT_EQ(p.text, "Let me check.");

  p = ParseToolCalls("<|tool_call>call:a{}<tool_call|><|tool_call>call:b{<|\"|>q<|\"|>:<|\"|>v<|\"|>}<tool_call|>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "a");
  EXPECT_EQ(p.calls[0].arguments_json, "{}");
  EXPECT_EQ(p.calls[1].arguments_json, R"({"q":"v"})");
  EXPECT_EQ(p.text, "");
}

TEST(ChatOutputTest, UnparseableCallsStayText) {
  for (std::string bad : std::vector<std::string>{"<|tool_call>call:f{path:<|\"|>/tmp", "<|tool_call>call:f{a:1}", "<|tool_call>f{a:1}<tool_call|>",
                          "<|tool_call>call:{a:1}<tool_call|>", "<|tool_call>call:f{a 1}<tool_call|>",
                          "<|tool_call>call:f{a:" + std::string(500, '[') + "}<tool_call|>"}) {
    ParsedToolCalls p = ParseToolCalls("pre " + bad + " post");
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.text, "pre " + bad + " post");
  }
}

TEST(ChatOutputTest, RenderedCallsParseBack) {
  const std::string args = R"({"b":[1,2,{"c":"x y"}],"a":"multi\nline <|channel> {x}","n":-0.5,"t":false})";
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = {{"", "tool_1", args}};
  auto r = RenderChat({Msg("user", "go"), call}, ChatOptions{});
  ASSERT_TRUE(r.ok());
  const size_t at = r->find("<|tool_call>");
  ASSERT_NE(at, std::string::npos);
  ParsedToolCalls p = ParseToolCalls(r->substr(at));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "tool_1");
  EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments_json), nlohmann::json::parse(args));
  EXPECT_EQ(p.text, "<|tool_response>");
}

TEST(ChatOutputTest, RandomFragmentsKeepTheTextAccountedFor) {
  // Parsing never fails; without a parsed call the text comes back unchanged,
  // and parsed calls always carry valid JSON objects.
  const std::vector<std::string> frags = {"call:", "<|tool_call>", "<tool_call|>", "{", "}", "[", "]", ",", ":",
                                          "<|\"|>", "path", "42", "-1.5e3", "true", "None", " ", "\n", "x",
                                          "\xC3\xA9", "<|channel>", "<channel|>", "thought\n", "\"q\""};
  std::mt19937 rng(5);
  int parsed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const int n = rng() % 30;
    for (int i = 0; i < n; ++i) text += frags[rng() % frags.size()];
    ParsedToolCalls p = ParseToolCalls(text);
    if (p.calls.empty()) {
      ASSERT_EQ(p.text, text);
    }
    for (const ToolCall& c : p.calls) {
      ++parsed;
      nlohmann::json j = nlohmann::json::parse(c.arguments_json, nullptr, false);
      ASSERT_TRUE(j.is_object()) << c.arguments_json;
    }
    ReasoningSplit r = SplitReasoning(text);
    ASSERT_LE(r.reasoning.size() + r.answer.size(), text.size() + 64);
  }
  EXPECT_GT(parsed, 0);  // the generator does produce well-formed calls
}

}  // namespace
}  // namespace g4
