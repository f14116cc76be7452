// Parsers for Gemma 4 model output: thought channels and tool calls. They
// work on decoded text with special tokens kept, never fail, and leave
// anything they cannot read where it was.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_format.h"
#include "tokenizer/chat_format_internal.h"

namespace g4 {
namespace {

using Json = nlohmann::ordered_json;
using chat_internal::kQuote;

constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";

// A recursive-descent reader of the template's value syntax (format_argument):
// <|"|>strings<|"|>, bare or quoted keys, numbers, true/false/null, nested
// {...} and [...]. Also accepts JSON strings and Python's True/False/None,
// which models sometimes write, and a bare word as a string.
class ValueReader {
 public:
  explicit ValueReader(std::string_view s, size_t pos) : s_(s), pos_(pos) {}
  size_t pos() const { return pos_; }

  std::optional<Json> Object(int depth) {
    if (depth > chat_internal::kMaxDepth || !Eat('{')) return std::nullopt;
    Json obj = Json::object();
    // ordered_json finds keys by linear scan; a side set keeps an object of
    // n keys O(n) instead of O(n^2). A repeated key keeps its first place and
    // its last value, as obj[key] = value would.
    auto& items = static_cast<std::vector<std::pair<const std::string, Json>>&>(obj.get_ref<Json::object_t&>());
    std::unordered_set<std::string> seen;
    SkipSpace();
    if (Eat('}')) return obj;
    while (true) {
      SkipSpace();
      std::optional<std::string> key = Key();
      if (!key) return std::nullopt;
      SkipSpace();
      if (!Eat(':')) return std::nullopt;
      SkipSpace();
      std::optional<Json> value = Value(depth + 1);
      if (!value) return std::nullopt;
      if (seen.insert(*key).second) {
        items.emplace_back(std::move(*key), std::move(*value));
      } else {
        obj[*key] = std::move(*value);
      }
      SkipSpace();
      if (Eat('}')) return obj;
      if (!Eat(',')) return std::nullopt;
    }
  }

 private:
  std::optional<Json> Value(int depth) {
    if (depth > chat_internal::kMaxDepth || pos_ >= s_.size()) return std::nullopt;
    if (StartsWith(kQuote)) return Quoted();
    const char c = s_[pos_];
    if (c == '{') return Object(depth);
    if (c == '[') return Array(depth);
    if (c == '"') return JsonString();
    return Scalar();
  }

  std::optional<Json> Array(int depth) {
    if (!Eat('[')) return std::nullopt;
    Json arr = Json::array();
    SkipSpace();
    if (Eat(']')) return arr;
    while (true) {
      SkipSpace();
      std::optional<Json> value = Value(depth + 1);
      if (!value) return std::nullopt;
      arr.push_back(std::move(*value));
      SkipSpace();
      if (Eat(']')) return arr;
      if (!Eat(',')) return std::nullopt;
    }
  }

  std::optional<std::string> Quoted() {
    pos_ += kQuote.size();
    const size_t end = s_.find(kQuote, pos_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string r(s_.substr(pos_, end - pos_));
    pos_ = end + kQuote.size();
    return r;
  }

  std::optional<std::string> JsonString() {
    size_t i = pos_ + 1;
    while (i < s_.size() && s_[i] != '"') i += s_[i] == '\\' ? 2 : 1;
    if (i >= s_.size()) return std::nullopt;
    Json j = Json::parse(s_.substr(pos_, i + 1 - pos_), nullptr, false);
    if (!j.is_string()) return std::nullopt;
    pos_ = i + 1;
    return j.get<std::string>();
  }

  std::optional<std::string> Key() {
    if (StartsWith(kQuote)) return Quoted();
    if (pos_ < s_.size() && s_[pos_] == '"') return JsonString();
    const size_t start = pos_;
    while (pos_ < s_.size() && std::string_view(":{}[],").find(s_[pos_]) == std::string_view::npos &&
           !StartsWith("<|")) {
      ++pos_;
    }
    std::string_view key = chat_internal::Trim(s_.substr(start, pos_ - start));
    if (key.empty()) return std::nullopt;
    return std::string(key);
  }

  // Numbers and literals, else a bare word taken as a string.
  std::optional<Json> Scalar() {
    const size_t start = pos_;
    while (pos_ < s_.size() && std::string_view(",}]").find(s_[pos_]) == std::string_view::npos &&
           !StartsWith("<|") && !StartsWith("<tool_call|>")) {
      ++pos_;
    }
    const std::string word(chat_internal::Trim(s_.substr(start, pos_ - start)));
    if (word.empty()) return std::nullopt;
    if (word == "true" || word == "True") return Json(true);
    if (word == "false" || word == "False") return Json(false);
    if (word == "null" || word == "None") return Json(nullptr);
    const char c = word[0];
    if (c == '-' || (c >= '0' && c <= '9')) {
      Json number = Json::parse(word, nullptr, false);
      if (number.is_number()) return number;
    }
    return Json(word);
  }

  bool StartsWith(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }

  std::string_view s_;
  size_t pos_;
};

// Parses one call starting at `pos` (at "<|tool_call>"); returns the call and
// the position after "<tool_call|>".
std::optional<std::pair<ToolCall, size_t>> ParseOneCall(std::string_view text, size_t pos) {
  pos += kCallOpen.size();
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n')) ++pos;
  if (text.substr(pos, 5) != "call:") return std::nullopt;
  pos += 5;
  // The name ends at '{'. Scan only while a name could continue: searching
  // the whole rest of the text for '{' from every marker was quadratic in
  // output made of many markers and no braces.
  size_t brace = pos;
  while (brace < text.size() && text[brace] != '{' && std::string_view("<>|}:,").find(text[brace]) == std::string_view::npos)
    ++brace;
  if (brace == text.size() || text[brace] != '{') return std::nullopt;
  std::string_view name = chat_internal::Trim(text.substr(pos, brace - pos));
  if (name.empty() || name.find_first_of(" \t\n<>|}:,") != std::string_view::npos) return std::nullopt;
  ValueReader reader(text, brace);
  std::optional<Json> args = reader.Object(0);
  if (!args) return std::nullopt;
  size_t end = reader.pos();
  while (end < text.size() && (text[end] == ' ' || text[end] == '\n')) ++end;
  if (text.substr(end, kCallClose.size()) != kCallClose) return std::nullopt;
  ToolCall call;
  call.name = std::string(name);
  call.arguments_json = args->dump(-1, ' ', false, Json::error_handler_t::replace);
  return std::make_pair(std::move(call), end + kCallClose.size());
}

void AddReasoning(std::string_view piece, ReasoningSplit* r) {
  if (piece.empty()) return;
  if (!r->reasoning.empty()) r->reasoning += '\n';
  r->reasoning += piece;
}

}  // namespace

ReasoningSplit SplitReasoning(std::string_view text) {
  ReasoningSplit r;
  size_t pos = 0;
  const size_t first_open = text.find(kChannelOpen);
  const size_t first_close = text.find(kChannelClose);
  if (first_close != std::string_view::npos && first_close < first_open) {
    AddReasoning(text.substr(0, first_close), &r);  // the prompt opened this channel
    pos = first_close + kChannelClose.size();
  }
  while (true) {
    const size_t open = text.find(kChannelOpen, pos);
    if (open == std::string_view::npos) {
      r.answer += text.substr(pos);
      break;
    }
    r.answer += text.substr(pos, open - pos);
    const size_t inner = open + kChannelOpen.size();
    const size_t close = text.find(kChannelClose, inner);
    std::string_view body = text.substr(inner, close == std::string_view::npos ? std::string_view::npos : close - inner);
    if (body.substr(0, 8) == "thought\n") {
      body.remove_prefix(8);
    } else if (body == "thought") {
      body = {};
    }
    AddReasoning(body, &r);
    if (close == std::string_view::npos) break;
    pos = close + kChannelClose.size();
  }
  return r;
}

ParsedToolCalls ParseToolCalls(std::string_view text) {
  ParsedToolCalls result;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kCallOpen, pos);
    if (open == std::string_view::npos) {
      result.text += text.substr(pos);
      break;
    }
    result.text += text.substr(pos, open - pos);
    if (auto parsed = ParseOneCall(text, open)) {
      result.calls.push_back(std::move(parsed->first));
      pos = parsed->second;
    } else {
      result.text += kCallOpen;
      pos = open + kCallOpen.size();
    }
  }
  return result;
}

}  // namespace g4
