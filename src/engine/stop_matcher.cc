#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace g4 {
namespace {

// Bytes at the end of `s` that start a UTF-8 sequence not yet complete.
size_t IncompleteUtf8Tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t need = (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<int> stop_ids, std::vector<std::string> stop_strings)
    : stop_ids_(stop_ids.begin(), stop_ids.end()) {
  for (std::string& s : stop_strings) {
    if (!s.empty()) stop_strings_.push_back(std::move(s));
  }
}

StopMatcher::Step StopMatcher::Feed(int token, std::string_view piece) {
  Step step;
  if (stopped_) {
    step.stopped = true;
    return step;
  }
  if (stop_ids_.count(token) != 0) {
    // A held prefix that never became a stop string is ordinary output.
    step.text = std::move(held_);
    held_.clear();
    step.stopped = stopped_ = true;
    step.stop_id = token;
    return step;
  }
  held_.append(piece);

  // Every stop string in held_ started after the text already emitted (that
  // text never ended with a prefix longer than what we held back), so the
  // first occurrence of each is its earliest completion.
  size_t best_end = std::string::npos, best_pos = 0;
  const std::string* best = nullptr;
  for (const std::string& s : stop_strings_) {
    const size_t pos = held_.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_pos)) {
      best_end = end;
      best_pos = pos;
      best = &s;
    }
  }
  if (best != nullptr) {
    step.text = held_.substr(0, best_pos);
    step.stop_string = *best;
    step.stopped = stopped_ = true;
    held_.clear();
    return step;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = IncompleteUtf8Tail(held_);
  for (const std::string& s : stop_strings_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  step.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return step;
}

std::string StopMatcher::Flush() {
  if (stopped_) return {};
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace g4
