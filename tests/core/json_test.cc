// Bounded JSON parsing (core/json.h): depth, size and duplicate-key limits,
// and memory that stays bounded on hostile text.
#include "core/json.h"
#include "test_util.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <string>

namespace g4 {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

using testing::ExpectError;

// Peak resident set of this process so far, in bytes.
uint64_t PeakRss() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

TEST(BoundedJson, ParsesOrdinaryDocuments) {
  auto j = ParseJsonBounded<Json>(R"({"a": [1, 2.5, "x", null, true], "b": {"c": {}}})", "test", "doc.json");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"][1], 2.5);
  EXPECT_TRUE((*j)["b"]["c"].is_object());
  auto o = ParseJsonBounded<OrderedJson>(R"({"z": 1, "a": 2, "m": [3]})", "test", "");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->dump(), R"({"z":1,"a":2,"m":[3]})");  // insertion order kept
}

TEST(BoundedJson, DeepNestingStopsAtTheLimit) {
  for (const std::string& open : {std::string("["), std::string("{\"a\":")}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += open;
    ExpectError(ParseJsonBounded<Json>(text, "test", "deep.json").status(), StatusCode::kInvalidArgument,
                {"[test] deep.json: ", "nested deeper than 64", "kMaxJsonDepth"});
    ExpectError(ParseJsonBounded<OrderedJson>(text, "test", "deep.json").status(), StatusCode::kInvalidArgument,
                {"kMaxJsonDepth"});
  }
  std::string ok_text(kMaxJsonDepth, '[');
  ok_text += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJsonBounded<Json>(ok_text, "test", "").ok());
  const std::string one_more = "[" + ok_text + "]";
  EXPECT_FALSE(ParseJsonBounded<Json>(one_more, "test", "").ok());
}

TEST(BoundedJson, DuplicateKeysAreErrorsAtEveryLevel) {
  ExpectError(ParseJsonBounded<Json>(R"({"a": 1, "a": 2})", "config", "c.json").status(),
              StatusCode::kInvalidArgument, {"[config] c.json: ", "key \"a\" appears twice", "top-level object"});
  ExpectError(ParseJsonBounded<Json>(R"({"rope": {"full": {"theta": 1, "theta": 2}}})", "config", "").status(),
              StatusCode::kInvalidArgument, {"\"theta\" appears twice in rope.full"});
  ExpectError(ParseJsonBounded<OrderedJson>(R"({"b": 1, "a": {"x": [], "x": []}})", "chat", "").status(),
              StatusCode::kInvalidArgument, {"\"x\" appears twice in a"});
  // The same key in sibling objects is fine.
  EXPECT_TRUE(ParseJsonBounded<Json>(R"([{"a": 1}, {"a": 2}])", "t", "").ok());
  EXPECT_TRUE(ParseJsonBounded<OrderedJson>(R"([{"a": 1}, {"a": 2}])", "t", "").ok());
  // Opting out keeps nlohmann's rule (the last one wins).
  JsonLimits lenient;
  lenient.reject_duplicate_keys = false;
  auto j = ParseJsonBounded<Json>(R"({"a": 1, "a": 2})", "t", "", StatusCode::kInvalidArgument, lenient);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"], 2);
}

TEST(BoundedJson, ValueCountIsLimited) {
  JsonLimits limits;
  limits.max_values = 10;
  std::string text = "[";
  for (int i = 0; i < 20; ++i) text += (i ? ",0" : "0");
  text += "]";
  ExpectError(ParseJsonBounded<Json>(text, "t", "", StatusCode::kCorrupt, limits).status(), StatusCode::kCorrupt,
              {"more than 10 JSON values", "kMaxJsonValues"});
}

TEST(BoundedJson, SyntaxErrorsNameTheByte) {
  ExpectError(ParseJsonBounded<Json>(R"({"a": })", "config", "").status(), StatusCode::kInvalidArgument,
              {"[config] not valid JSON", "byte 7"});
  ExpectError(ParseJsonBounded<Json>("", "config", "").status(), StatusCode::kInvalidArgument,
              {"not valid JSON"});
  ExpectError(ParseJsonBounded<Json>("{} x", "config", "").status(), StatusCode::kInvalidArgument,
              {"not valid JSON"});
  ExpectError(ParseJsonBounded<Json>("[1e999]", "config", "").status(), StatusCode::kInvalidArgument,
              {"not valid JSON"});
  ExpectError(ParseJsonBounded<Json>("\"\xff\"", "config", "").status(), StatusCode::kInvalidArgument,
              {"not valid JSON"});
}

TEST(BoundedJson, NinetyNineMegabytesOfBracketsUseNoMemory) {
  // nlohmann's parse() turns this into gigabytes of nested arrays.
  const std::string text(99'000'000, '[');
  const uint64_t before = PeakRss();
  ExpectError(ParseJsonBounded<Json>(text, "test", "").status(), StatusCode::kInvalidArgument, {"kMaxJsonDepth"});
  EXPECT_LT(PeakRss() - before, uint64_t{64} << 20);
}

TEST(BoundedJson, ManyKeysParseInLinearTime) {
  // nlohmann's parser callback rescans the parent object after each child
  // (quadratic); ordered_json looks keys up linearly. 200k keys would take
  // minutes either way; here they must simply finish (no timing asserted).
  std::string text = "{";
  for (int i = 0; i < 200000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":{\"v\":[1]}";
  text += "}";
  auto j = ParseJsonBounded<Json>(text, "t", "");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->size(), 200000u);
  auto o = ParseJsonBounded<OrderedJson>(text, "t", "");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->begin().key(), "k0");
}

}  // namespace
}  // namespace g4
