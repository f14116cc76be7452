// RenderChat: a direct port of the Gemma 4 chat template's text-only path.
// Each helper names the Jinja macro it mirrors; the deliberate deviations are
// listed in docs/chat-format.md.
#include "tokenizer/chat_format.h"

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tokenizer/chat_format_internal.h"
#include "tokenizer/utf8.h"

namespace g4 {
namespace {

using Json = nlohmann::ordered_json;
using chat_internal::kQuote;

enum class PrevType { kNone, kThink, kTool, kToolCall, kToolResponse };

std::string Upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return r;
}

// Jinja truthiness of a value that may be missing (nullptr = undefined).
bool Truthy(const Json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number_integer()) return v->get<int64_t>() != 0;
  if (v->is_number_unsigned()) return v->get<uint64_t>() != 0;
  if (v->is_number_float()) return v->get<double>() != 0.0;
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  return !v->empty();  // array / object
}

// value['key'] in Jinja: undefined unless `v` is a mapping holding `key`.
const Json* Get(const Json& v, const char* key) {
  if (!v.is_object()) return nullptr;
  auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

// What `{{ v }}` prints: Python's str() of the value.
void AppendPrinted(const Json* v, std::string* out) {
  if (v == nullptr) return;  // undefined prints as ""
  if (v->is_string()) {
    *out += v->get_ref<const std::string&>();
  } else if (v->is_boolean()) {
    *out += v->get<bool>() ? "True" : "False";
  } else if (v->is_null()) {
    *out += "None";
  } else {
    *out += v->dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

// `| upper` of a value: its printed form upper-cased.
std::string PrintedUpper(const Json* v) {
  std::string s;
  AppendPrinted(v, &s);
  return Upper(s);
}

// Jinja's dictsort: keys compared case-insensitively, ties in document order.
std::vector<std::pair<std::string, const Json*>> DictSort(const Json& obj) {
  std::vector<std::pair<std::string, const Json*>> items;
  for (auto it = obj.begin(); it != obj.end(); ++it) items.emplace_back(it.key(), &it.value());
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return chat_internal::LowerAscii(a.first) < chat_internal::LowerAscii(b.first);
  });
  return items;
}

// Names and keys are printed bare, so anything that delimits the markup is
// refused rather than silently restructuring what the model sees.
Status CheckBare(const std::string& what, std::string_view value, bool is_name) {
  if (is_name && value.empty()) return InvalidArgument("[chat] " + what + ": empty name");
  for (std::string_view bad : {"<|", "|>", "{", "}", "[", "]", ":", ",", "\n", "\r"}) {
    if (value.find(bad) != std::string_view::npos) {
      std::string shown = bad == "\n" ? "\\n" : bad == "\r" ? "\\r" : std::string(bad);
      return InvalidArgument("[chat] " + what + " \"" + std::string(value) + "\": contains \"" + shown +
                             "\", which would break the Gemma 4 markup");
    }
  }
  if (is_name && value.find_first_of(" \t") != std::string_view::npos) {
    return InvalidArgument("[chat] " + what + " \"" + std::string(value) + "\": contains whitespace");
  }
  return Status::Ok();
}

// Text must be valid UTF-8 before it is rendered: the tokenizer would refuse
// it anyway, but with an offset into the whole rendered prompt, which names
// neither the message nor the place in it.
Status CheckUtf8(const std::string& what, std::string_view text) {
  const size_t bad = utf8::FindInvalid(text);
  if (bad == utf8::kValid) return Status::Ok();
  char byte[8];
  std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<uint8_t>(text[bad]));
  return InvalidArgument("[chat] " + what + " is not valid UTF-8: byte " + byte + " at offset " +
                         std::to_string(bad) + " of " + std::to_string(text.size()));
}

// Rejects nesting deeper than our recursive printers accept and keys that
// would break the markup.
Status CheckJson(const Json& v, const std::string& what, int depth) {
  if (depth > chat_internal::kMaxDepth) {
    return InvalidArgument("[chat] " + what + ": nested deeper than " + std::to_string(chat_internal::kMaxDepth));
  }
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      G4_RETURN_IF_ERROR(CheckBare(what + " key", it.key(), false));
      G4_RETURN_IF_ERROR(CheckJson(it.value(), what, depth + 1));
    }
  } else if (v.is_array()) {
    for (const Json& e : v) G4_RETURN_IF_ERROR(CheckJson(e, what, depth + 1));
  }
  return Status::Ok();
}

// Parses `text` as a JSON object; "" is an empty object.
StatusOr<Json> ParseObject(const std::string& text, const std::string& what) {
  if (chat_internal::Trim(text).empty()) return Json::object();
  // Bounded (depth, size, duplicate keys): this text comes from requests.
  G4_ASSIGN_OR_RETURN(Json j, ParseJsonBounded<Json>(text, "chat", what));
  if (!j.is_object()) return InvalidArgument("[chat] " + what + ": must be a JSON object, got " + j.type_name());
  G4_RETURN_IF_ERROR(CheckJson(j, what, 0));
  return j;
}

// macro format_argument
void FormatArgument(const Json& v, bool escape_keys, std::string* out) {
  if (v.is_string()) {
    *out += kQuote;
    *out += v.get_ref<const std::string&>();
    *out += kQuote;
  } else if (v.is_boolean()) {
    *out += v.get<bool>() ? "true" : "false";
  } else if (v.is_object()) {
    *out += '{';
    bool first = true;
    for (const auto& [key, value] : DictSort(v)) {
      if (!first) *out += ',';
      first = false;
      if (escape_keys) {
        *out += kQuote;
        *out += key;
        *out += kQuote;
      } else {
        *out += key;
      }
      *out += ':';
      FormatArgument(*value, escape_keys, out);
    }
    *out += '}';
  } else if (v.is_array()) {
    *out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += ',';
      FormatArgument(v[i], escape_keys, out);
    }
    *out += ']';
  } else {
    AppendPrinted(&v, out);
  }
}

void FormatRequired(const Json* required, std::string* out) {
  *out += "required:[";
  if (required != nullptr && required->is_array()) {
    for (size_t i = 0; i < required->size(); ++i) {
      if (i) *out += ',';
      *out += kQuote;
      AppendPrinted(&(*required)[i], out);
      *out += kQuote;
    }
  }
  *out += ']';
}

// macro format_parameters (the `required` argument is unused by the template).
void FormatParameters(const Json& properties, bool filter_keys, std::string* out) {
  static const char* kStandardKeys[] = {"description", "type", "properties", "required", "nullable"};
  bool found_first = false;
  for (const auto& [key, value_ptr] : DictSort(properties)) {
    const Json& value = *value_ptr;
    // (clang 14 cannot capture a structured binding in a lambda.)
    const std::string& name = key;
    if (filter_keys && std::any_of(std::begin(kStandardKeys), std::end(kStandardKeys),
                                   [&](const char* k) { return name == k; })) {
      continue;
    }
    if (found_first) *out += ',';
    found_first = true;
    *out += key;
    *out += ":{";
    bool add_comma = false;
    auto comma = [&] {
      if (add_comma) *out += ',';
      add_comma = true;
    };
    if (const Json* d = Get(value, "description"); Truthy(d)) {
      *out += "description:";
      *out += kQuote;
      AppendPrinted(d, out);
      *out += kQuote;
      add_comma = true;
    }
    const std::string type = PrintedUpper(Get(value, "type"));
    if (type == "STRING") {
      if (const Json* e = Get(value, "enum"); Truthy(e)) {
        comma();
        *out += "enum:";
        FormatArgument(*e, true, out);
      }
    } else if (type == "ARRAY") {
      const Json* items = Get(value, "items");
      if (items != nullptr && items->is_object() && !items->empty()) {
        comma();
        *out += "items:{";
        bool items_first = false;
        for (const auto& [item_key, item_value] : DictSort(*items)) {
          if (item_value->is_null()) continue;
          if (items_first) *out += ',';
          items_first = true;
          if (item_key == "properties") {
            *out += "properties:{";
            if (item_value->is_object()) FormatParameters(*item_value, false, out);
            *out += '}';
          } else if (item_key == "required") {
            FormatRequired(item_value, out);
          } else if (item_key == "type") {
            *out += "type:";
            if (item_value->is_string()) {
              FormatArgument(Json(Upper(item_value->get_ref<const std::string&>())), true, out);
            } else {
              Json upper = Json::array();
              if (item_value->is_array()) {
                for (const Json& t : *item_value) upper.push_back(PrintedUpper(&t));
              }
              FormatArgument(upper, true, out);
            }
          } else {
            *out += item_key;
            *out += ':';
            FormatArgument(*item_value, true, out);
          }
        }
        *out += '}';
      }
    }
    if (Truthy(Get(value, "nullable"))) {
      comma();
      *out += "nullable:true";
    }
    if (type == "OBJECT") {
      const Json* props = Get(value, "properties");
      comma();
      *out += "properties:{";
      if (props != nullptr && props->is_object()) {
        FormatParameters(*props, false, out);
      } else if (value.is_object()) {
        FormatParameters(value, true, out);
      }
      *out += '}';
      if (const Json* req = Get(value, "required"); Truthy(req)) {
        comma();
        FormatRequired(req, out);
      }
    }
    comma();
    *out += "type:";
    *out += kQuote;
    *out += type;
    *out += kQuote;
    *out += '}';
  }
}

// macro format_function_declaration. Deviation: the template closes the
// parameters brace only inside its `if params['type']`; we always close it.
std::string FormatDeclaration(const ToolDefinition& tool, const Json& params) {
  std::string out = "declaration:" + tool.name + "{description:";
  out += kQuote;
  out += tool.description;
  out += kQuote;
  if (!params.empty()) {
    out += ",parameters:{";
    if (const Json* props = Get(params, "properties"); Truthy(props)) {
      out += "properties:{";
      if (props->is_object()) FormatParameters(*props, false, &out);
      out += "},";
    }
    if (const Json* req = Get(params, "required"); Truthy(req)) {
      FormatRequired(req, &out);
      out += ',';
    }
    if (const Json* type = Get(params, "type"); Truthy(type)) {
      out += "type:";
      out += kQuote;
      out += PrintedUpper(type);
      out += kQuote;
    }
    out += '}';
  }
  out += '}';
  return std::string(chat_internal::Trim(out));
}

// macro strip_thinking: drops every "<|channel>...<channel|>" span.
std::string StripThinking(std::string_view text) {
  std::string result;
  size_t pos = 0;
  while (true) {
    const size_t close = text.find("<channel|>", pos);
    std::string_view part = text.substr(pos, close == std::string_view::npos ? std::string_view::npos : close - pos);
    const size_t open = part.find("<|channel>");
    result += open == std::string_view::npos ? part : part.substr(0, open);
    if (close == std::string_view::npos) break;
    pos = close + std::string_view("<channel|>").size();
  }
  return std::string(chat_internal::Trim(result));
}

// macro format_tool_response_block, for a string response.
void FormatToolResponse(const std::string& name, const std::string& content, std::string* out) {
  *out += "<|tool_response>response:";
  *out += name;
  *out += "{value:";
  *out += kQuote;
  *out += content;
  *out += kQuote;
  *out += "}<tool_response|>";
}

std::string Where(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// Roles after aliasing model -> assistant; "" for an unknown role.
std::string NormalizeRole(const std::string& role) {
  if (role == "model") return "assistant";
  for (const char* r : {"system", "developer", "user", "assistant", "tool"}) {
    if (role == r) return role;
  }
  return "";
}

}  // namespace

ChatMessage TextMessage(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

StatusOr<std::string> RenderChat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  if (messages.empty()) return InvalidArgument("[chat] no messages to render");

  // Validate everything first so rendering below cannot fail halfway.
  std::vector<std::string> roles(messages.size());
  std::vector<std::vector<Json>> call_args(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    roles[i] = NormalizeRole(m.role);
    if (roles[i].empty()) {
      return InvalidArgument("[chat] " + Where(i) + ": unknown role \"" + m.role +
                             "\" (expected system, developer, user, assistant, model or tool)");
    }
    G4_RETURN_IF_ERROR(CheckUtf8(Where(i) + ".content", m.content));
    G4_RETURN_IF_ERROR(CheckUtf8(Where(i) + ".reasoning", m.reasoning));
    if ((roles[i] == "system" || roles[i] == "developer") && i != 0) {
      return InvalidArgument("[chat] " + Where(i) + ": a " + roles[i] + " message must be the first message");
    }
    if (!m.tool_calls.empty() && roles[i] != "assistant") {
      return InvalidArgument("[chat] " + Where(i) + ": only assistant messages carry tool calls (role \"" + m.role +
                             "\")");
    }
    for (size_t c = 0; c < m.tool_calls.size(); ++c) {
      const std::string what = Where(i) + ".tool_calls[" + std::to_string(c) + "]";
      G4_RETURN_IF_ERROR(CheckBare(what + ".name", m.tool_calls[c].name, true));
      G4_ASSIGN_OR_RETURN(Json args, ParseObject(m.tool_calls[c].arguments_json, what + ".arguments"));
      call_args[i].push_back(std::move(args));
    }
    if (roles[i] == "tool") {
      size_t j = i;
      while (j > 0 && roles[j - 1] == "tool") --j;
      if (j == 0 || roles[j - 1] != "assistant" || messages[j - 1].tool_calls.empty()) {
        return InvalidArgument("[chat] " + Where(i) +
                               ": tool message does not follow an assistant message with tool calls");
      }
      if (!m.name.empty()) G4_RETURN_IF_ERROR(CheckBare(Where(i) + ".name", m.name, true));
    }
  }
  std::vector<Json> tool_params;
  for (size_t t = 0; t < options.tools.size(); ++t) {
    const std::string what = "tools[" + std::to_string(t) + "]";
    G4_RETURN_IF_ERROR(CheckBare(what + ".name", options.tools[t].name, true));
    G4_RETURN_IF_ERROR(CheckUtf8(what + ".description", options.tools[t].description));
    G4_ASSIGN_OR_RETURN(Json params, ParseObject(options.tools[t].parameters_json, what + ".parameters"));
    tool_params.push_back(std::move(params));
  }

  std::string out = "<bos>";
  PrevType prev = PrevType::kNone;
  size_t start = 0;
  const bool first_is_system = roles[0] == "system" || roles[0] == "developer";
  if (options.enable_thinking || !options.tools.empty() || first_is_system) {
    out += "<|turn>system\n";
    if (options.enable_thinking) {
      out += "<|think|>\n";
      prev = PrevType::kThink;
    }
    if (first_is_system) {
      out += chat_internal::Trim(messages[0].content);
      start = 1;
    }
    for (size_t t = 0; t < options.tools.size(); ++t) {
      out += "<|tool>";
      out += FormatDeclaration(options.tools[t], tool_params[t]);
      out += "<tool|>";
      prev = PrevType::kTool;
    }
    out += "<turn|>\n";
  }

  size_t last_user = std::string::npos;  // index into messages
  for (size_t i = start; i < messages.size(); ++i) {
    if (roles[i] == "user") last_user = i;
  }

  for (size_t i = start; i < messages.size(); ++i) {
    if (roles[i] == "tool") continue;  // rendered with the call it answers
    const ChatMessage& m = messages[i];
    prev = PrevType::kNone;
    const bool is_model = roles[i] == "assistant";
    std::string prev_role;
    for (size_t j = i; j > start; --j) {
      if (roles[j - 1] != "tool") {
        prev_role = roles[j - 1];
        break;
      }
    }
    if (!(is_model && prev_role == "assistant")) {
      out += "<|turn>";
      out += is_model ? "model" : roles[i];
      out += '\n';
    }
    const bool after_last_user = last_user == std::string::npos || i > last_user;
    if (!m.reasoning.empty() && after_last_user && !m.tool_calls.empty()) {
      out += "<|channel>thought\n" + m.reasoning + "\n<channel|>";
    }
    for (size_t c = 0; c < m.tool_calls.size(); ++c) {
      out += "<|tool_call>call:" + m.tool_calls[c].name + "{";
      bool first = true;
      for (const auto& [key, value] : DictSort(call_args[i][c])) {
        if (!first) out += ',';
        first = false;
        out += key;
        out += ':';
        FormatArgument(*value, /*escape_keys=*/false, &out);
      }
      out += "}<tool_call|>";
      prev = PrevType::kToolCall;
    }
    bool responded = false;
    if (!m.tool_calls.empty()) {
      for (size_t k = i + 1; k < messages.size() && roles[k] == "tool"; ++k) {
        const ChatMessage& follow = messages[k];
        // Deviation: the template matches ids even when both are absent,
        // which names every id-less response after the last call; we prefer
        // the tool message's own name in that case.
        std::string name = follow.name.empty() ? "unknown" : follow.name;
        if (!follow.tool_call_id.empty() || follow.name.empty()) {
          for (const ToolCall& tc : m.tool_calls) {
            if (tc.id == follow.tool_call_id) name = tc.name;
          }
        }
        FormatToolResponse(name, follow.content, &out);
        responded = true;
        prev = PrevType::kToolResponse;
      }
    }
    const std::string content = is_model ? StripThinking(m.content) : std::string(chat_internal::Trim(m.content));
    out += content;
    if (prev == PrevType::kToolCall && !responded) {
      out += "<|tool_response>";
    } else if (!(responded && content.empty())) {
      out += "<turn|>\n";
    }
  }

  if (options.add_generation_prompt && prev != PrevType::kToolResponse && prev != PrevType::kToolCall) {
    out += "<|turn>model\n";
    if (options.empty_thought_channel && !options.enable_thinking) out += "<|channel>thought\n<channel|>";
  }
  return out;
}

bool TemplateClosesThoughtChannel(std::string_view source) {
  // The Jinja source writes the newline as the two characters "\n"; inside a
  // JSON-encoded tokenizer_config.json it is "\\n".
  for (std::string_view needle : {"<|channel>thought\\n<channel|>", "<|channel>thought\\\\n<channel|>",
                                  "<|channel>thought\n<channel|>"}) {
    if (source.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace g4

namespace g4::chat_internal {
namespace {

bool IsPythonSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The code point starting at s[pos] and its byte length; length 0 when the
// bytes there are not well-formed UTF-8 (such bytes never count as space).
uint32_t DecodeAt(std::string_view s, size_t pos, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  *len = 0;
  if (n == 0 || pos + n > s.size()) return 0;
  uint32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + k]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  *len = n;
  return c;
}

}  // namespace

std::string_view Trim(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t len = 0;
    const uint32_t c = DecodeAt(s, begin, &len);
    if (len == 0 || !IsPythonSpace(c)) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    const uint32_t c = DecodeAt(s, start, &len);
    if (len == 0 || start + len != end || !IsPythonSpace(c)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

std::string LowerAscii(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

}  // namespace g4::chat_internal
