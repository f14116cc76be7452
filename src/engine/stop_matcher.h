// StopMatcher: decides, while streaming, which decoded text is safe to send.
//
// Generation stops at a stop token id or when the decoded text contains a
// stop string; neither the stop token's text nor the stop string (nor
// anything after it) is ever emitted. Text that could still turn out to be
// the beginning of a stop string is held back until it cannot, as is an
// incomplete UTF-8 sequence at the end of the text. Everything else is
// emitted exactly once, so the concatenation of all emitted pieces is the
// same however the text was split into tokens.
//
// The stop is where the first stop string is completed in the text (the
// earliest end; on a tie, the longest string): the answer depends on the
// text only, not on how it was split.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace g4 {

class StopMatcher {
 public:
  // Empty stop strings are ignored.
  StopMatcher(std::vector<int> stop_ids, std::vector<std::string> stop_strings);

  struct Step {
    std::string text;         // safe to emit now (may be empty)
    bool stopped = false;     // generation is over
    int stop_id = -1;         // the stop token that ended it, else -1
    std::string stop_string;  // the stop string that ended it, else empty
  };

  // One generated token and its decoded text. After a stop every call
  // returns an empty, stopped Step.
  Step Feed(int token, std::string_view piece);
  // Generation ended for another reason (length limit): the held-back text.
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  std::unordered_set<int> stop_ids_;
  std::vector<std::string> stop_strings_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace g4
