// The conversation `g4 chat` holds: system prompt, thinking switch and the
// turns so far, rendered with the model's chat format (tokenizer/
// chat_format.h) into the prompt of the next turn.
//
// A conversation saved with /save is its KV cache file (.g4kv) alone: the
// token ids in the file are the rendered conversation, and /load rebuilds
// the turns from them (ParseConversation), so one file restores both.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_format.h"

namespace g4::cli {

struct Conversation {
  std::string system;
  bool think = false;
  std::vector<ChatMessage> turns;  // user / assistant, alternating

  // The prompt text for the next answer: system, turns, generation prompt.
  StatusOr<std::string> Render(bool empty_thought_channel) const;
  void Clear() { turns.clear(); }
};

// Rebuilds a conversation from the text of a rendered one (what the cache
// of a chat holds: "<bos><|turn>system\n...<turn|>\n<|turn>user\n...").
// The last turn may be an unfinished answer (no <turn|>: generation stops
// on it without running it) or the open generation prompt. Model turns keep
// their answer only (thought channels dropped, as the template drops them).
// InvalidArgument when the text is not a chat conversation (e.g. a raw
// --prompt-cache file).
StatusOr<Conversation> ParseConversation(std::string_view text);

}  // namespace g4::cli
