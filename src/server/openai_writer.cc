#include "server/openai_writer.h"

#include <chrono>

#include "server/api_error.h"
#include "server/sse.h"

namespace g4::server {
namespace {

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A token as text and its raw bytes: a byte-fallback token is one byte
// (its text a replacement character unless it is ASCII).
struct TokenBytes {
  std::string text;
  Json bytes = Json::array();
};

TokenBytes TokenOf(const Tokenizer& tok, int32_t id) {
  TokenBytes t;
  auto d = tok.DecodeToken(id);
  if (!d) return t;
  if (d->byte >= 0) {
    t.bytes.push_back(d->byte);
    t.text = d->byte < 0x80 ? std::string(1, static_cast<char>(d->byte)) : std::string("\xEF\xBF\xBD");
  } else {
    t.text = d->text;
    for (unsigned char c : t.text) t.bytes.push_back(static_cast<int>(c));
  }
  return t;
}

Json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

}  // namespace

Json ChatLogprobs(const Tokenizer& tok, const std::vector<LogProbs>& logprobs) {
  Json content = Json::array();
  for (const LogProbs& lp : logprobs) {
    TokenBytes t = TokenOf(tok, lp.token);
    Json top = Json::array();
    for (const TokenLogProb& alt : lp.top) {
      TokenBytes a = TokenOf(tok, alt.id);
      top.push_back({{"token", a.text}, {"logprob", alt.logprob}, {"bytes", a.bytes}});
    }
    content.push_back({{"token", t.text}, {"logprob", lp.logprob}, {"bytes", t.bytes}, {"top_logprobs", top}});
  }
  return content;
}

// ---- chat

ChatWriter::ChatWriter(const Tokenizer& tokenizer, std::string model, int n, bool stream, bool include_usage,
                       bool logprobs)
    : tokenizer_(tokenizer),
      id_(RandomId("chatcmpl-")),
      model_(std::move(model)),
      created_(Now()),
      stream_(stream),
      include_usage_(include_usage),
      logprobs_(logprobs),
      choices_(n) {}

Json ChatWriter::Chunk(int choice, Json delta, const Json& logprobs, const Json& finish_reason) const {
  Json c = {{"index", choice}, {"delta", std::move(delta)}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  Json j = {{"id", id_},           {"object", "chat.completion.chunk"}, {"created", created_},
            {"model", model_},     {"system_fingerprint", "g4"},        {"choices", Json::array({std::move(c)})}};
  if (include_usage_) j["usage"] = nullptr;
  return j;
}

std::string ChatWriter::Start() {
  if (!stream_) return "";
  std::string out;
  for (int i = 0; i < static_cast<int>(choices_.size()); ++i)
    out += SseData(Dump(Chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)));
  return out;
}

std::string ChatWriter::Events(int i, const std::vector<OutputEvent>& events, const std::vector<LogProbs>& logprobs) {
  Choice& c = choices_[i];
  Json lp = nullptr;
  if (logprobs_ && !logprobs.empty()) {
    Json content = ChatLogprobs(tokenizer_, logprobs);
    if (!stream_) {
      for (Json& e : content) c.logprobs.push_back(std::move(e));
    } else {
      lp = {{"content", std::move(content)}};
    }
  }
  std::string out;
  auto send = [&](Json delta) {
    out += SseData(Dump(Chunk(i, std::move(delta), lp, nullptr)));
    lp = nullptr;  // logprobs ride on the first chunk of this batch
  };
  for (const OutputEvent& e : events) {
    switch (e.kind) {
      case OutputEvent::Kind::kText:
        c.content += e.text;
        if (stream_) send({{"content", e.text}});
        break;
      case OutputEvent::Kind::kReasoning:
        c.reasoning += e.text;
        if (stream_) send({{"reasoning_content", e.text}});
        break;
      case OutputEvent::Kind::kToolCall: {
        const std::string call_id = RandomId("call_");
        const std::string args = e.call.arguments_json.empty() ? "{}" : e.call.arguments_json;
        c.tool_calls.push_back(
            {{"id", call_id}, {"type", "function"}, {"function", {{"name", e.call.name}, {"arguments", args}}}});
        if (stream_) {
          send({{"tool_calls", Json::array({{{"index", c.calls},
                                             {"id", call_id},
                                             {"type", "function"},
                                             {"function", {{"name", e.call.name}, {"arguments", ""}}}}})}});
          send({{"tool_calls", Json::array({{{"index", c.calls}, {"function", {{"arguments", args}}}}})}});
        }
        ++c.calls;
        break;
      }
    }
  }
  if (stream_ && !lp.is_null()) send(Json::object());  // logprobs of tokens whose text is still held back
  return out;
}

std::string ChatWriter::Finish(int i, const std::string& reason) {
  Choice& c = choices_[i];
  c.finish_reason = reason == "stop" && c.calls > 0 ? "tool_calls" : reason;
  if (!stream_) return "";
  return SseData(Dump(Chunk(i, Json::object(), nullptr, c.finish_reason)));
}

std::string ChatWriter::End(const Usage& usage) {
  if (!stream_ && !error_.empty()) return ErrorBody({500, error_, ""}, ApiFlavor::kOpenAi);
  if (stream_) {
    std::string out;
    if (include_usage_) {
      Json j = {{"id", id_},       {"object", "chat.completion.chunk"}, {"created", created_},
                {"model", model_}, {"system_fingerprint", "g4"},        {"choices", Json::array()},
                {"usage", UsageJson(usage)}};
      out += SseData(Dump(j));
    }
    return out + SseData("[DONE]");
  }
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    Json msg = {{"role", "assistant"}};
    msg["content"] = c.content.empty() && c.calls > 0 ? Json(nullptr) : Json(c.content);
    if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
    if (c.calls > 0) msg["tool_calls"] = c.tool_calls;
    choices.push_back({{"index", i},
                       {"message", std::move(msg)},
                       {"logprobs", logprobs_ ? Json({{"content", c.logprobs}}) : Json(nullptr)},
                       {"finish_reason", c.finish_reason.empty() ? "stop" : c.finish_reason}});
  }
  Json j = {{"id", id_},       {"object", "chat.completion"}, {"created", created_},
            {"model", model_}, {"system_fingerprint", "g4"},  {"choices", std::move(choices)},
            {"usage", UsageJson(usage)}};
  return Dump(j);
}

std::string ChatWriter::StreamError(const std::string& message) {
  if (!stream_) {
    error_ = message;
    return "";
  }
  return SseData(Dump({{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}}));
}

// ---- completions

CompletionWriter::CompletionWriter(const Tokenizer& tokenizer, std::string model, int choices, bool stream,
                                   bool include_usage, bool logprobs)
    : tokenizer_(tokenizer),
      id_(RandomId("cmpl-")),
      model_(std::move(model)),
      created_(Now()),
      stream_(stream),
      include_usage_(include_usage),
      logprobs_(logprobs),
      choices_(choices) {}

Json CompletionWriter::Object(Json choices) const {
  Json j = {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_},
            {"system_fingerprint", "g4"}, {"choices", std::move(choices)}};
  if (stream_ && include_usage_) j["usage"] = nullptr;
  return j;
}

Json CompletionWriter::Logprobs(Choice& c, const std::vector<LogProbs>& logprobs, size_t text_offset) {
  Json tokens = Json::array(), values = Json::array(), top = Json::array(), offsets = Json::array();
  for (const LogProbs& lp : logprobs) {
    const TokenBytes t = TokenOf(tokenizer_, lp.token);
    tokens.push_back(t.text);
    values.push_back(lp.logprob);
    Json alts = Json::object();
    for (const TokenLogProb& a : lp.top) alts[TokenOf(tokenizer_, a.id).text] = a.logprob;
    top.push_back(std::move(alts));
    offsets.push_back(text_offset);
    text_offset += t.text.size();
  }
  if (!stream_) {
    for (auto& [from, to] : {std::pair<Json*, Json*>{&tokens, &c.lp_tokens}, {&values, &c.lp_values},
                             {&top, &c.lp_top}, {&offsets, &c.lp_offsets}})
      for (Json& e : *from) to->push_back(std::move(e));
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", top}, {"text_offset", offsets}};
}

std::string CompletionWriter::Text(int i, const std::string& text, const std::vector<int32_t>& tokens,
                                   const std::vector<LogProbs>& logprobs) {
  Choice& c = choices_[i];
  const size_t offset = c.text.size();
  c.text += text;
  Json lp = nullptr;
  if (logprobs_ && !logprobs.empty()) lp = Logprobs(c, logprobs, offset);
  if (!stream_ || (text.empty() && lp.is_null())) return "";
  Json ch = {{"text", text}, {"index", i}, {"logprobs", lp}, {"finish_reason", nullptr}};
  return SseData(Dump(Object(Json::array({std::move(ch)}))));
}

std::string CompletionWriter::Finish(int i, const std::string& reason) {
  choices_[i].finish_reason = reason;
  if (!stream_) return "";
  Json ch = {{"text", ""}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", reason}};
  return SseData(Dump(Object(Json::array({std::move(ch)}))));
}

std::string CompletionWriter::End(const Usage& usage) {
  if (!stream_ && !error_.empty()) return ErrorBody({500, error_, ""}, ApiFlavor::kOpenAi);
  if (stream_) {
    std::string out;
    if (include_usage_) {
      Json j = Object(Json::array());
      j["usage"] = UsageJson(usage);
      out += SseData(Dump(j));
    }
    return out + SseData("[DONE]");
  }
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = choices_[i];
    Json lp = nullptr;
    if (logprobs_)
      lp = {{"tokens", c.lp_tokens}, {"token_logprobs", c.lp_values}, {"top_logprobs", c.lp_top},
            {"text_offset", c.lp_offsets}};
    choices.push_back({{"text", c.text}, {"index", i}, {"logprobs", lp},
                       {"finish_reason", c.finish_reason.empty() ? "stop" : c.finish_reason}});
  }
  Json j = Object(std::move(choices));
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string CompletionWriter::StreamError(const std::string& message) {
  if (!stream_) {
    error_ = message;
    return "";
  }
  return SseData(Dump({{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}}));
}

}  // namespace g4::server
