#include "server/openai_request.h"

#include <algorithm>
#include <cstdlib>

namespace g4::server {
namespace {

constexpr int64_t kMaxTokensLimit = int64_t{1} << 24;

Status ParseStop(const Json& body, const char* key, const RequestLimits& limits, std::vector<std::string>* out) {
  const Json* v = Find(body, key);
  if (!v) return Status::Ok();
  if (v->is_string()) {
    out->push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (static_cast<int>(v->size()) > limits.max_stop)
      return FieldError(key, "has more than " + std::to_string(limits.max_stop) + " entries");
    for (const Json& s : *v) {
      if (!s.is_string()) return FieldError(key, "must be a string or an array of strings");
      out->push_back(s.get<std::string>());
    }
  } else {
    return FieldError(key, "must be a string or an array of strings");
  }
  for (const std::string& s : *out)
    if (s.empty()) return FieldError(key, "must not contain empty strings");
  return Status::Ok();
}

Status ParseLogitBias(const Json& body, const RequestLimits& limits, std::map<int, float>* out) {
  const Json* v = Find(body, "logit_bias");
  if (!v) return Status::Ok();
  if (!v->is_object()) return FieldError("logit_bias", "must be an object mapping token ids to biases");
  if (static_cast<int>(v->size()) > limits.max_logit_bias)
    return FieldError("logit_bias", "has more than " + std::to_string(limits.max_logit_bias) + " entries");
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX)
      return FieldError("logit_bias", "keys must be token ids, got '" + key + "'");
    if (!it->is_number() || !(it->get<double>() >= -100 && it->get<double>() <= 100))
      return FieldError("logit_bias." + key, "must be a number between -100 and 100");
    (*out)[static_cast<int>(id)] = static_cast<float>(it->get<double>());
  }
  return Status::Ok();
}

}  // namespace

Status ParseOpenAiGeneration(const Json& body, const RequestLimits& limits, bool chat, GenerationRequest* g) {
  std::optional<std::string> model;
  G4_RETURN_IF_ERROR(ReadString(body, "model", &model));
  g->model = model.value_or("");
  std::optional<bool> stream;
  G4_RETURN_IF_ERROR(ReadBool(body, "stream", &stream));
  g->stream = stream.value_or(false);
  if (const Json* so = Find(body, "stream_options")) {
    if (!so->is_object()) return FieldError("stream_options", "must be an object");
    if (!g->stream) return FieldError("stream_options", "is only allowed when 'stream' is true");
    std::optional<bool> usage;
    G4_RETURN_IF_ERROR(ReadBool(*so, "include_usage", &usage, "stream_options."));
    g->include_usage = usage.value_or(false);
  }
  std::optional<int64_t> max_tokens, max_completion_tokens;
  G4_RETURN_IF_ERROR(ReadInt(body, "max_tokens", &max_tokens, 1, kMaxTokensLimit));
  if (chat) G4_RETURN_IF_ERROR(ReadInt(body, "max_completion_tokens", &max_completion_tokens, 1, kMaxTokensLimit));
  g->max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;

  SamplingRequest& s = g->sampling;
  std::optional<double> d;
  G4_RETURN_IF_ERROR(ReadNumber(body, "temperature", &d, 0, 2));
  if (d) s.overrides.temperature = static_cast<float>(*d);
  d.reset();
  G4_RETURN_IF_ERROR(ReadNumber(body, "top_p", &d, 0, 1));
  if (d) {
    if (*d == 0) return FieldError("top_p", "must be greater than 0 (use temperature 0 for greedy decoding)");
    s.overrides.top_p = static_cast<float>(*d);
  }
  std::optional<int64_t> top_k;
  G4_RETURN_IF_ERROR(ReadInt(body, "top_k", &top_k, -1, 1 << 20));
  if (top_k) s.overrides.top_k = static_cast<int>(std::max<int64_t>(0, *top_k));  // -1: off (vLLM)
  d.reset();
  G4_RETURN_IF_ERROR(ReadNumber(body, "min_p", &d, 0, 1));
  if (d) s.overrides.min_p = static_cast<float>(*d);
  d.reset();
  G4_RETURN_IF_ERROR(ReadNumber(body, "repetition_penalty", &d, 1e-3, 100));
  if (d) s.overrides.repetition_penalty = static_cast<float>(*d);
  d.reset();
  G4_RETURN_IF_ERROR(ReadNumber(body, "presence_penalty", &d, -2, 2));
  if (d) s.presence_penalty = static_cast<float>(*d);
  d.reset();
  G4_RETURN_IF_ERROR(ReadNumber(body, "frequency_penalty", &d, -2, 2));
  if (d) s.frequency_penalty = static_cast<float>(*d);
  std::optional<int64_t> seed;
  G4_RETURN_IF_ERROR(ReadInt(body, "seed", &seed, INT64_MIN, INT64_MAX));
  if (seed) s.seed = static_cast<uint64_t>(*seed);
  G4_RETURN_IF_ERROR(ParseLogitBias(body, limits, &s.logit_bias));
  G4_RETURN_IF_ERROR(ParseStop(body, "stop", limits, &g->stop));

  std::optional<int64_t> n;
  G4_RETURN_IF_ERROR(ReadInt(body, "n", &n, 1, limits.max_n));
  g->n = static_cast<int>(n.value_or(1));
  if (chat) {
    std::optional<bool> logprobs;
    G4_RETURN_IF_ERROR(ReadBool(body, "logprobs", &logprobs));
    std::optional<int64_t> top;
    G4_RETURN_IF_ERROR(ReadInt(body, "top_logprobs", &top, 0, limits.max_top_logprobs));
    if (top && !logprobs.value_or(false)) return FieldError("top_logprobs", "requires 'logprobs' to be true");
    g->logprobs = logprobs.value_or(false);
    g->top_logprobs = static_cast<int>(top.value_or(0));
  } else {
    std::optional<int64_t> logprobs;
    G4_RETURN_IF_ERROR(ReadInt(body, "logprobs", &logprobs, 0, 5));
    g->logprobs = logprobs.has_value();
    g->top_logprobs = static_cast<int>(logprobs.value_or(0));
  }
  return Status::Ok();
}

namespace {

// A message's content: a string, or an array of text parts.
Status ParseContent(const Json& msg, const std::string& where, std::string* out) {
  const Json* c = Find(msg, "content");
  if (!c) return Status::Ok();
  if (c->is_string()) {
    *out = c->get<std::string>();
    return Status::Ok();
  }
  if (!c->is_array()) return FieldError(where + "content", "must be a string or an array of content parts");
  return ForEachObject(*c, where + "content", [&](const Json& part, const std::string& at) -> Status {
    std::optional<std::string> type, text;
    G4_RETURN_IF_ERROR(ReadString(part, "type", &type, at));
    if (type == "text" || type == "input_text" || type == "refusal") {
      G4_RETURN_IF_ERROR(ReadString(part, type == "refusal" ? "refusal" : "text", &text, at));
      if (!text) return FieldError(at + "text", "is required");
      *out += *text;
    } else if (!type) {
      return FieldError(at + "type", "is required");
    } else {
      return RefuseRequest("content part type '" + *type + "' at " + at.substr(0, at.size() - 1) +
                           " is not supported: g4 serves text only");
    }
    return Status::Ok();
  });
}

Status ParseMessageToolCalls(const Json& msg, const std::string& where, std::vector<ToolCall>* out) {
  const Json* calls = Find(msg, "tool_calls");
  if (!calls) return Status::Ok();
  if (!calls->is_array()) return FieldError(where + "tool_calls", "must be an array");
  return ForEachObject(*calls, where + "tool_calls", [&](const Json& c, const std::string& at) -> Status {
    std::optional<std::string> id, type, name, args;
    G4_RETURN_IF_ERROR(ReadString(c, "id", &id, at));
    G4_RETURN_IF_ERROR(ReadString(c, "type", &type, at));
    if (type && *type != "function") return FieldError(at + "type", "must be \"function\"");
    const Json* fn = Find(c, "function");
    if (!fn || !fn->is_object()) return FieldError(at + "function", "is required and must be an object");
    G4_RETURN_IF_ERROR(ReadString(*fn, "name", &name, at + "function."));
    if (!name) return FieldError(at + "function.name", "is required");
    G4_RETURN_IF_ERROR(ReadString(*fn, "arguments", &args, at + "function."));
    ToolCall call;
    call.id = id.value_or("");
    call.name = *name;
    call.arguments_json = args.value_or("");
    out->push_back(std::move(call));
    return Status::Ok();
  });
}

Status ParseMessages(const Json& body, std::vector<ChatMessage>* out) {
  const Json* msgs = Find(body, "messages");
  if (!msgs) return FieldError("messages", "is required");
  if (!msgs->is_array()) return FieldError("messages", "must be an array");
  if (msgs->empty()) return FieldError("messages", "must contain at least one message");
  return ForEachObject(*msgs, "messages", [&](const Json& m, const std::string& where) -> Status {
    std::optional<std::string> role;
    G4_RETURN_IF_ERROR(ReadString(m, "role", &role, where));
    if (!role) return FieldError(where + "role", "is required");
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    if (std::find(std::begin(kRoles), std::end(kRoles), *role) == std::end(kRoles))
      return FieldError(where + "role",
                        "'" + *role + "' is not one of system, developer, user, assistant, tool");
    ChatMessage msg;
    msg.role = *role;
    G4_RETURN_IF_ERROR(ParseContent(m, where, &msg.content));
    if (msg.role == "assistant") {
      G4_RETURN_IF_ERROR(ParseMessageToolCalls(m, where, &msg.tool_calls));
      std::optional<std::string> reasoning;
      G4_RETURN_IF_ERROR(ReadString(m, "reasoning_content", &reasoning, where));
      if (!reasoning) G4_RETURN_IF_ERROR(ReadString(m, "reasoning", &reasoning, where));
      msg.reasoning = reasoning.value_or("");
    } else if (Find(m, "tool_calls")) {
      return FieldError(where + "tool_calls", "is only allowed on assistant messages");
    } else if (!Find(m, "content")) {
      return FieldError(where + "content", "is required for " + msg.role + " messages");
    }
    if (msg.role == "tool") {
      std::optional<std::string> id, name;
      G4_RETURN_IF_ERROR(ReadString(m, "tool_call_id", &id, where));
      G4_RETURN_IF_ERROR(ReadString(m, "name", &name, where));
      if (!id && !name) return FieldError(where + "tool_call_id", "is required for tool messages");
      msg.tool_call_id = id.value_or("");
      msg.name = name.value_or("");
    }
    out->push_back(std::move(msg));
    return Status::Ok();
  });
}

Status ParseOpenAiTools(const Json& body, std::vector<ToolDefinition>* out) {
  const Json* tools = Find(body, "tools");
  if (!tools) return Status::Ok();
  if (!tools->is_array()) return FieldError("tools", "must be an array");
  return ForEachObject(*tools, "tools", [&](const Json& t, const std::string& at) -> Status {
    std::optional<std::string> type, name, description;
    G4_RETURN_IF_ERROR(ReadString(t, "type", &type, at));
    if (type.value_or("function") != "function")
      return RefuseRequest("tool type '" + *type + "' at " + at.substr(0, at.size() - 1) +
                           " is not supported: only \"function\" tools");
    const Json* fn = Find(t, "function");
    if (!fn || !fn->is_object()) return FieldError(at + "function", "is required and must be an object");
    G4_RETURN_IF_ERROR(ReadString(*fn, "name", &name, at + "function."));
    if (!name || name->empty()) return FieldError(at + "function.name", "is required");
    G4_RETURN_IF_ERROR(ReadString(*fn, "description", &description, at + "function."));
    ToolDefinition def;
    def.name = *name;
    def.description = description.value_or("");
    if (const Json* p = Find(*fn, "parameters")) {
      if (!p->is_object()) return FieldError(at + "function.parameters", "must be a JSON Schema object");
      def.parameters_json = Dump(*p);
    }
    out->push_back(std::move(def));
    return Status::Ok();
  });
}

}  // namespace

StatusOr<ChatRequest> ParseChatCompletionRequest(const Json& body, const RequestLimits& limits) {
  ChatRequest r;
  G4_RETURN_IF_ERROR(ParseOpenAiGeneration(body, limits, /*chat=*/true, &r.gen));
  G4_RETURN_IF_ERROR(ParseMessages(body, &r.messages));
  G4_RETURN_IF_ERROR(ParseOpenAiTools(body, &r.tools));
  if (Find(body, "functions") || Find(body, "function_call"))
    return RefuseRequest("'functions' and 'function_call' are deprecated and not supported; use 'tools'");
  if (const Json* tc = Find(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string c = tc->get<std::string>();
      if (c == "none") {
        r.tools.clear();
      } else if (c == "required") {
        return RefuseRequest(
            "tool_choice \"required\" needs constrained decoding, which g4 does not have yet; use \"auto\"");
      } else if (c != "auto") {
        return FieldError("tool_choice", "must be \"none\", \"auto\" or \"required\"");
      }
    } else if (tc->is_object()) {
      return RefuseRequest(
          "tool_choice naming a function needs constrained decoding, which g4 does not have yet; use "
          "\"auto\"");
    } else {
      return FieldError("tool_choice", "must be a string or an object");
    }
  }
  if (const Json* pt = Find(body, "parallel_tool_calls"); pt && !pt->is_boolean())
    return FieldError("parallel_tool_calls", "must be true or false");
  if (const Json* rf = Find(body, "response_format")) {
    if (!rf->is_object()) return FieldError("response_format", "must be an object");
    std::optional<std::string> type;
    G4_RETURN_IF_ERROR(ReadString(*rf, "type", &type, "response_format."));
    if (type.value_or("text") != "text")
      return RefuseRequest("response_format '" + *type +
                           "' is not supported: g4 has no structured output yet (only {\"type\": \"text\"})");
  }
  if (const Json* kw = Find(body, "chat_template_kwargs")) {
    if (!kw->is_object()) return FieldError("chat_template_kwargs", "must be an object");
    std::optional<bool> think;
    G4_RETURN_IF_ERROR(ReadBool(*kw, "enable_thinking", &think, "chat_template_kwargs."));
    r.enable_thinking = think.value_or(false);
  }
  return r;
}

StatusOr<CompletionRequest> ParseCompletionRequest(const Json& body, const RequestLimits& limits) {
  CompletionRequest r;
  G4_RETURN_IF_ERROR(ParseOpenAiGeneration(body, limits, /*chat=*/false, &r.gen));
  const Json* p = Find(body, "prompt");
  if (!p) return FieldError("prompt", "is required");
  auto ids_of = [](const Json& arr, std::vector<int32_t>* ids) {
    for (const Json& t : arr) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) return false;
      ids->push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return true;
  };
  const std::string kShape = "must be a string, an array of strings, an array of token ids or an array of those";
  if (p->is_string()) {
    r.prompts.push_back({p->get<std::string>(), {}, false});
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    CompletionPrompt cp;
    cp.is_ids = true;
    if (!ids_of(*p, &cp.ids)) return FieldError("prompt", kShape);
    r.prompts.push_back(std::move(cp));
  } else if (p->is_array() && !p->empty()) {
    for (const Json& e : *p) {
      CompletionPrompt cp;
      if (e.is_string()) {
        cp.text = e.get<std::string>();
      } else if (e.is_array() && !e.empty()) {
        cp.is_ids = true;
        if (!ids_of(e, &cp.ids)) return FieldError("prompt", kShape);
      } else {
        return FieldError("prompt", kShape);
      }
      r.prompts.push_back(std::move(cp));
    }
  } else {
    return FieldError("prompt", kShape);
  }
  if (static_cast<int>(r.prompts.size()) > limits.max_prompts)
    return FieldError("prompt", "has more than " + std::to_string(limits.max_prompts) + " prompts");
  if (static_cast<int>(r.prompts.size()) * r.gen.n > limits.max_n)
    return FieldError("n", "times the number of prompts exceeds " + std::to_string(limits.max_n));
  std::optional<bool> echo;
  G4_RETURN_IF_ERROR(ReadBool(body, "echo", &echo));
  r.echo = echo.value_or(false);
  std::optional<std::string> suffix;
  G4_RETURN_IF_ERROR(ReadString(body, "suffix", &suffix));
  if (suffix && !suffix->empty()) return RefuseRequest("'suffix' (fill-in-the-middle) is not supported");
  std::optional<int64_t> best_of;
  G4_RETURN_IF_ERROR(ReadInt(body, "best_of", &best_of, 1, limits.max_n));
  if (best_of && *best_of != r.gen.n) return RefuseRequest("'best_of' other than 'n' is not supported");
  return r;
}

}  // namespace g4::server
