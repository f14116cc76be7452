#include "server/anthropic_request.h"

#include <map>

namespace g4::server {
namespace {

// The text of a tool_result's content: a string or text blocks.
Status ToolResultText(const Json& block, const std::string& at, std::string* out) {
  const Json* c = Find(block, "content");
  if (!c) return Status::Ok();
  if (c->is_string()) {
    *out = c->get<std::string>();
    return Status::Ok();
  }
  if (!c->is_array()) return FieldError(at + "content", "must be a string or an array of blocks");
  return ForEachObject(*c, at + "content", [&](const Json& b, const std::string& bat) -> Status {
    std::optional<std::string> type, text;
    G4_RETURN_IF_ERROR(ReadString(b, "type", &type, bat));
    if (type != "text")
      return RefuseRequest("tool_result content of type '" + type.value_or("?") + "' is not supported");
    G4_RETURN_IF_ERROR(ReadString(b, "text", &text, bat));
    if (!out->empty()) *out += "\n";
    *out += text.value_or("");
    return Status::Ok();
  });
}

struct Turn {
  std::vector<ChatMessage> tool_results;  // user: answers, before its text
  ChatMessage msg;
  bool has_text = false;
};

Status ParseBlocks(const Json& content, const std::string& where, bool assistant,
                   std::map<std::string, std::string>& tool_names, Turn* turn) {
  return ForEachObject(content, where + "content", [&](const Json& b, const std::string& at) -> Status {
    std::optional<std::string> type;
    G4_RETURN_IF_ERROR(ReadString(b, "type", &type, at));
    if (!type) return FieldError(at + "type", "is required");
    if (*type == "text") {
      std::optional<std::string> text;
      G4_RETURN_IF_ERROR(ReadString(b, "text", &text, at));
      if (!text) return FieldError(at + "text", "is required");
      turn->msg.content += *text;
      turn->has_text = true;
    } else if (*type == "thinking" && assistant) {
      std::optional<std::string> thinking;
      G4_RETURN_IF_ERROR(ReadString(b, "thinking", &thinking, at));
      if (!turn->msg.reasoning.empty()) turn->msg.reasoning += "\n";
      turn->msg.reasoning += thinking.value_or("");
    } else if (*type == "redacted_thinking" && assistant) {
      // dropped: its text is not ours to read
    } else if (*type == "tool_use" && assistant) {
      std::optional<std::string> id, name;
      G4_RETURN_IF_ERROR(ReadString(b, "id", &id, at));
      G4_RETURN_IF_ERROR(ReadString(b, "name", &name, at));
      if (!id || !name) return FieldError(at + (id ? "name" : "id"), "is required");
      const Json* input = Find(b, "input");
      if (input && !input->is_object()) return FieldError(at + "input", "must be an object");
      ToolCall call;
      call.id = *id;
      call.name = *name;
      call.arguments_json = input ? Dump(*input) : "{}";
      tool_names[*id] = *name;
      turn->msg.tool_calls.push_back(std::move(call));
    } else if (*type == "tool_result" && !assistant) {
      std::optional<std::string> id;
      G4_RETURN_IF_ERROR(ReadString(b, "tool_use_id", &id, at));
      if (!id) return FieldError(at + "tool_use_id", "is required");
      if (const Json* e = Find(b, "is_error"); e && !e->is_boolean())
        return FieldError(at + "is_error", "must be true or false");
      ChatMessage result;
      result.role = "tool";
      result.tool_call_id = *id;
      if (auto it = tool_names.find(*id); it != tool_names.end()) result.name = it->second;
      G4_RETURN_IF_ERROR(ToolResultText(b, at, &result.content));
      turn->tool_results.push_back(std::move(result));
    } else if (*type == "image" || *type == "document" || *type == "search_result") {
      return RefuseRequest("content block type '" + *type + "' is not supported: g4 serves text only");
    } else {
      return FieldError(at + "type", "'" + *type + "' is not a valid block for a " +
                                         (assistant ? "assistant" : "user") + " message");
    }
    return Status::Ok();
  });
}

Status ParseSystem(const Json& body, std::string* out) {
  const Json* s = Find(body, "system");
  if (!s) return Status::Ok();
  if (s->is_string()) {
    *out = s->get<std::string>();
    return Status::Ok();
  }
  if (!s->is_array()) return FieldError("system", "must be a string or an array of text blocks");
  return ForEachObject(
      *s, "system",
      [&](const Json& b, const std::string& at) -> Status {
        std::optional<std::string> type, text;
        G4_RETURN_IF_ERROR(ReadString(b, "type", &type, at));
        if (type != "text") return FieldError(at + "type", "must be \"text\"");
        G4_RETURN_IF_ERROR(ReadString(b, "text", &text, at));
        if (!out->empty()) *out += "\n";
        *out += text.value_or("");
        return Status::Ok();
      },
      "must be a text block");
}

Status ParseAnthropicTools(const Json& body, std::vector<ToolDefinition>* out) {
  const Json* tools = Find(body, "tools");
  if (!tools) return Status::Ok();
  if (!tools->is_array()) return FieldError("tools", "must be an array");
  return ForEachObject(*tools, "tools", [&](const Json& t, const std::string& at) -> Status {
    std::optional<std::string> type, name, description;
    G4_RETURN_IF_ERROR(ReadString(t, "type", &type, at));
    if (type && *type != "custom")
      return RefuseRequest("tool type '" + *type + "' (a server tool) is not supported: only client tools");
    G4_RETURN_IF_ERROR(ReadString(t, "name", &name, at));
    if (!name || name->empty()) return FieldError(at + "name", "is required");
    G4_RETURN_IF_ERROR(ReadString(t, "description", &description, at));
    const Json* schema = Find(t, "input_schema");
    if (!schema || !schema->is_object())
      return FieldError(at + "input_schema", "is required and must be an object");
    out->push_back({*name, description.value_or(""), Dump(*schema)});
    return Status::Ok();
  });
}

}  // namespace

StatusOr<ChatRequest> ParseMessagesRequest(const Json& body, bool count_tokens, const RequestLimits& limits) {
  ChatRequest r;
  GenerationRequest& g = r.gen;
  std::optional<std::string> model;
  G4_RETURN_IF_ERROR(ReadString(body, "model", &model));
  if (!model) return FieldError("model", "is required");
  g.model = *model;
  if (!count_tokens) {
    std::optional<int64_t> max_tokens;
    G4_RETURN_IF_ERROR(ReadInt(body, "max_tokens", &max_tokens, 1, int64_t{1} << 24));
    if (!max_tokens) return FieldError("max_tokens", "is required");
    g.max_tokens = max_tokens;
    std::optional<bool> stream;
    G4_RETURN_IF_ERROR(ReadBool(body, "stream", &stream));
    g.stream = stream.value_or(false);
    std::optional<double> d;
    G4_RETURN_IF_ERROR(ReadNumber(body, "temperature", &d, 0, 1));
    if (d) g.sampling.overrides.temperature = static_cast<float>(*d);
    d.reset();
    G4_RETURN_IF_ERROR(ReadNumber(body, "top_p", &d, 0, 1));
    if (d) {
      if (*d == 0) return FieldError("top_p", "must be greater than 0");
      g.sampling.overrides.top_p = static_cast<float>(*d);
    }
    std::optional<int64_t> top_k;
    G4_RETURN_IF_ERROR(ReadInt(body, "top_k", &top_k, 0, 1 << 20));
    if (top_k) g.sampling.overrides.top_k = static_cast<int>(*top_k);
    if (const Json* stops = Find(body, "stop_sequences")) {
      if (!stops->is_array()) return FieldError("stop_sequences", "must be an array of strings");
      if (static_cast<int>(stops->size()) > limits.max_stop)
        return FieldError("stop_sequences", "has more than " + std::to_string(limits.max_stop) + " entries");
      for (const Json& s : *stops) {
        if (!s.is_string() || s.get<std::string>().empty())
          return FieldError("stop_sequences", "must be an array of non-empty strings");
        g.stop.push_back(s.get<std::string>());
      }
    }
  }
  if (const Json* th = Find(body, "thinking")) {
    if (!th->is_object()) return FieldError("thinking", "must be an object");
    std::optional<std::string> type;
    G4_RETURN_IF_ERROR(ReadString(*th, "type", &type, "thinking."));
    if (type == "enabled") {
      std::optional<int64_t> budget;
      G4_RETURN_IF_ERROR(ReadInt(*th, "budget_tokens", &budget, 1, int64_t{1} << 24, "thinking."));
      r.enable_thinking = true;
    } else if (type != "disabled") {
      return FieldError("thinking.type", "must be \"enabled\" or \"disabled\"");
    }
  }
  G4_RETURN_IF_ERROR(ParseAnthropicTools(body, &r.tools));
  if (const Json* tc = Find(body, "tool_choice")) {
    if (!tc->is_object()) return FieldError("tool_choice", "must be an object");
    std::optional<std::string> type;
    G4_RETURN_IF_ERROR(ReadString(*tc, "type", &type, "tool_choice."));
    if (type == "none") {
      r.tools.clear();
    } else if (type == "any" || type == "tool") {
      return RefuseRequest("tool_choice \"" + *type +
                           "\" needs constrained decoding, which g4 does not have yet; use \"auto\"");
    } else if (type != "auto") {
      return FieldError("tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\"");
    }
  }

  std::string system;
  G4_RETURN_IF_ERROR(ParseSystem(body, &system));
  if (!system.empty()) r.messages.push_back(TextMessage("system", std::move(system)));
  const Json* msgs = Find(body, "messages");
  if (!msgs) return FieldError("messages", "is required");
  if (!msgs->is_array()) return FieldError("messages", "must be an array");
  if (msgs->empty()) return FieldError("messages", "must contain at least one message");
  std::map<std::string, std::string> tool_names;  // tool_use id -> name
  G4_RETURN_IF_ERROR(ForEachObject(*msgs, "messages", [&](const Json& m, const std::string& where) -> Status {
    std::optional<std::string> role;
    G4_RETURN_IF_ERROR(ReadString(m, "role", &role, where));
    if (!role) return FieldError(where + "role", "is required");
    if (*role != "user" && *role != "assistant")
      return FieldError(where + "role", "'" + *role + "' is not one of user, assistant");
    const bool assistant = *role == "assistant";
    Turn turn;
    turn.msg.role = *role;
    const Json* content = Find(m, "content");
    if (!content) return FieldError(where + "content", "is required");
    if (content->is_string()) {
      turn.msg.content = content->get<std::string>();
      turn.has_text = true;
    } else if (content->is_array()) {
      G4_RETURN_IF_ERROR(ParseBlocks(*content, where, assistant, tool_names, &turn));
    } else {
      return FieldError(where + "content", "must be a string or an array of content blocks");
    }
    for (ChatMessage& t : turn.tool_results) r.messages.push_back(std::move(t));
    if (assistant || turn.has_text || turn.tool_results.empty()) r.messages.push_back(std::move(turn.msg));
    return Status::Ok();
  }));
  const ChatMessage& last = r.messages.back();
  r.continue_last = last.role == "assistant" && last.tool_calls.empty();
  return r;
}

}  // namespace g4::server
