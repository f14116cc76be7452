#include "server/output_parser.h"

#include <algorithm>

namespace g4::server {
namespace {

constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";
constexpr std::string_view kThought = "thought\n";

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t PartialSuffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

void OutputParser::Emit(OutputEvent::Kind kind, std::string_view text, std::vector<OutputEvent>* out) {
  if (text.empty()) return;
  std::string piece(text);
  if (kind == OutputEvent::Kind::kReasoning) {
    if (new_channel_ && any_reasoning_) piece.insert(piece.begin(), '\n');  // channels joined by "\n"
    new_channel_ = false;
    any_reasoning_ = true;
  }
  if (!out->empty() && out->back().kind == kind && kind != OutputEvent::Kind::kToolCall) {
    out->back().text += piece;
    return;
  }
  OutputEvent e;
  e.kind = kind;
  e.text = std::move(piece);
  out->push_back(std::move(e));
}

std::vector<OutputEvent> OutputParser::Push(std::string_view text) {
  buf_.append(text);
  std::vector<OutputEvent> out;
  Run(false, &out);
  return out;
}

std::vector<OutputEvent> OutputParser::Finish() {
  std::vector<OutputEvent> out;
  Run(true, &out);
  return out;
}

void OutputParser::Run(bool final, std::vector<OutputEvent>* out) {
  while (true) {
    switch (state_) {
      case State::kText: {
        size_t best = std::string::npos;
        std::string_view marker;
        for (std::string_view m : {kChannelOpen, kChannelClose, kCallOpen}) {
          if (m == kCallOpen && !tools_) continue;
          const size_t p = buf_.find(m);
          if (p < best) {
            best = p;
            marker = m;
          }
        }
        if (best == std::string::npos) {
          size_t hold = 0;
          if (!final) {
            for (std::string_view m : {kChannelOpen, kChannelClose, kCallOpen})
              if (m != kCallOpen || tools_) hold = std::max(hold, PartialSuffix(buf_, m));
          }
          Emit(OutputEvent::Kind::kText, std::string_view(buf_).substr(0, buf_.size() - hold), out);
          buf_.erase(0, buf_.size() - hold);
          return;
        }
        Emit(OutputEvent::Kind::kText, std::string_view(buf_).substr(0, best), out);
        buf_.erase(0, best + marker.size());
        if (marker == kChannelOpen) {
          state_ = State::kChannelName;
          new_channel_ = true;
          seen_channel_ = true;
        } else if (marker == kCallOpen) {
          state_ = State::kToolCall;
          call_ = std::string(kCallOpen);
        } else if (seen_channel_) {
          Emit(OutputEvent::Kind::kText, kChannelClose, out);  // after a channel: ordinary text
        }  // before any channel: dropped
        break;
      }
      case State::kChannelName: {
        // The channel's name line ("thought\n") is not reasoning; a body that
        // is exactly "thought" is empty.
        std::string_view b = buf_;
        if (b.substr(0, kThought.size()) == kThought) {
          buf_.erase(0, kThought.size());
          state_ = State::kReasoning;
          break;
        }
        const bool maybe_name = kThought.substr(0, b.size()) == b;
        const bool maybe_bare = b.substr(0, 7) == "thought" &&
                                kChannelClose.substr(0, b.size() - 7) == b.substr(7);
        if (!final && (maybe_name || maybe_bare) && b.size() < 7 + kChannelClose.size()) return;
        if (b.substr(0, 7 + kChannelClose.size()) == std::string("thought") + std::string(kChannelClose) ||
            (final && b == "thought"))
          buf_.erase(0, 7);
        state_ = State::kReasoning;
        break;
      }
      case State::kReasoning: {
        const size_t p = buf_.find(kChannelClose);
        if (p == std::string::npos) {
          const size_t hold = final ? 0 : PartialSuffix(buf_, kChannelClose);
          Emit(OutputEvent::Kind::kReasoning, std::string_view(buf_).substr(0, buf_.size() - hold), out);
          buf_.erase(0, buf_.size() - hold);
          return;
        }
        Emit(OutputEvent::Kind::kReasoning, std::string_view(buf_).substr(0, p), out);
        buf_.erase(0, p + kChannelClose.size());
        state_ = State::kText;
        break;
      }
      case State::kToolCall: {
        const size_t p = buf_.find(kCallClose);
        if (p == std::string::npos && !final) {
          // Keep a partial close marker in buf_ so the next piece finds it.
          const size_t hold = PartialSuffix(buf_, kCallClose);
          call_.append(buf_, 0, buf_.size() - hold);
          buf_.erase(0, buf_.size() - hold);
          return;
        }
        const size_t take = p == std::string::npos ? buf_.size() : p + kCallClose.size();
        call_.append(buf_, 0, take);
        buf_.erase(0, take);
        ParsedToolCalls parsed = ParseToolCalls(call_);
        state_ = State::kText;
        if (parsed.calls.size() == 1 && parsed.text.empty()) {
          OutputEvent e;
          e.kind = OutputEvent::Kind::kToolCall;
          e.call = std::move(parsed.calls[0]);
          out->push_back(std::move(e));
        } else {
          // Not a call: its opener is text and the rest is read again (as
          // ParseToolCalls does, so a call inside it is still found).
          Emit(OutputEvent::Kind::kText, kCallOpen, out);
          buf_.insert(0, call_, kCallOpen.size());
        }
        call_.clear();
        break;
      }
    }
  }
}

}  // namespace g4::server
