#include "server/anthropic_writer.h"

#include "server/sse.h"

namespace g4::server {

MessagesWriter::MessagesWriter(std::string model, bool stream, int prompt_tokens, int cached_tokens)
    : id_(RandomId("msg_")),
      model_(std::move(model)),
      stream_(stream),
      prompt_tokens_(prompt_tokens),
      cached_tokens_(cached_tokens) {}

std::string MessagesWriter::Start() {
  if (!stream_) return "";
  Json usage = {{"input_tokens", prompt_tokens_ - cached_tokens_},
                {"cache_creation_input_tokens", 0},
                {"cache_read_input_tokens", cached_tokens_},
                {"output_tokens", 0}};
  Json msg = {{"id", id_},         {"type", "message"},          {"role", "assistant"},
              {"model", model_},   {"content", Json::array()},   {"stop_reason", nullptr},
              {"stop_sequence", nullptr}, {"usage", usage}};
  return SseEvent("message_start", Dump({{"type", "message_start"}, {"message", msg}})) +
         SseEvent("ping", Dump({{"type", "ping"}}));
}

std::string MessagesWriter::Close() {
  if (open_ == Block::kNone) return "";
  open_ = Block::kNone;
  if (!stream_) return "";
  return SseEvent("content_block_stop", Dump({{"type", "content_block_stop"}, {"index", index_}}));
}

std::string MessagesWriter::Open(Block kind) {
  if (open_ == kind) return "";
  std::string out = Close();
  open_ = kind;
  ++index_;
  Json block = kind == Block::kText ? Json{{"type", "text"}, {"text", ""}}
                                    : Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  if (!stream_) {
    content_.push_back(block);
    return "";
  }
  return out + SseEvent("content_block_start",
                        Dump({{"type", "content_block_start"}, {"index", index_}, {"content_block", block}}));
}

std::string MessagesWriter::Events(const std::vector<OutputEvent>& events) {
  std::string out;
  for (const OutputEvent& e : events) {
    if (e.kind == OutputEvent::Kind::kToolCall) {
      out += Close();
      ++index_;
      tool_use_ = true;
      const std::string args = e.call.arguments_json.empty() ? "{}" : e.call.arguments_json;
      Json input = Json::parse(args, nullptr, false);
      if (!input.is_object()) input = Json::object();
      const std::string id = RandomId("toolu_");
      if (!stream_) {
        content_.push_back({{"type", "tool_use"}, {"id", id}, {"name", e.call.name}, {"input", input}});
        continue;
      }
      Json block = {{"type", "tool_use"}, {"id", id}, {"name", e.call.name}, {"input", Json::object()}};
      out += SseEvent("content_block_start",
                      Dump({{"type", "content_block_start"}, {"index", index_}, {"content_block", block}}));
      out += SseEvent("content_block_delta",
                      Dump({{"type", "content_block_delta"},
                            {"index", index_},
                            {"delta", {{"type", "input_json_delta"}, {"partial_json", Dump(input)}}}}));
      out += SseEvent("content_block_stop", Dump({{"type", "content_block_stop"}, {"index", index_}}));
      continue;
    }
    const bool text = e.kind == OutputEvent::Kind::kText;
    out += Open(text ? Block::kText : Block::kThinking);
    if (!stream_) {
      content_.back()[text ? "text" : "thinking"].get_ref<std::string&>() += e.text;
      continue;
    }
    Json delta = text ? Json{{"type", "text_delta"}, {"text", e.text}}
                      : Json{{"type", "thinking_delta"}, {"thinking", e.text}};
    out += SseEvent("content_block_delta",
                    Dump({{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}}));
  }
  return out;
}

std::string MessagesWriter::Finish(const std::string& reason, const std::string& stop_string, int output_tokens) {
  std::string stop_reason = "end_turn";
  if (reason == "length") stop_reason = "max_tokens";
  else if (tool_use_) stop_reason = "tool_use";
  else if (!stop_string.empty()) stop_reason = "stop_sequence";
  const Json stop_sequence = stop_reason == "stop_sequence" ? Json(stop_string) : Json(nullptr);
  if (!stream_) {
    Json usage = {{"input_tokens", prompt_tokens_ - cached_tokens_},
                  {"cache_creation_input_tokens", 0},
                  {"cache_read_input_tokens", cached_tokens_},
                  {"output_tokens", output_tokens}};
    Json j = {{"id", id_},       {"type", "message"},         {"role", "assistant"},
              {"model", model_}, {"content", content_},        {"stop_reason", stop_reason},
              {"stop_sequence", stop_sequence}, {"usage", usage}};
    return Dump(j);
  }
  std::string out = Close();
  out += SseEvent("message_delta", Dump({{"type", "message_delta"},
                                         {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}}},
                                         {"usage", {{"output_tokens", output_tokens}}}}));
  out += SseEvent("message_stop", Dump({{"type", "message_stop"}}));
  return out;
}

std::string MessagesWriter::StreamError(const std::string& message) {
  return SseEvent("error", Dump({{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}}));
}

}  // namespace g4::server
