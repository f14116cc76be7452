// Added tokens (<bos>, <|turn>, "\n", <unused0>, ...) are found in the raw
// text before normalization and BPE, like HF's AddedVocabulary: scanning left
// to right, the earliest-starting match wins, and among matches starting
// there the longest (aho-corasick LeftmostLongest). A byte trie gives the
// same answer; a first-byte filter keeps the scan cheap on ordinary text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace g4 {

class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  // Adds `content` -> `id`; a repeated content keeps the later id. Empty
  // content is ignored (HF never matches it).
  void Add(std::string_view content, int32_t id);

  struct Match {
    size_t begin = 0, end = 0;
    int32_t id = -1;
  };
  // The first match at or after byte `from`; id -1 when there is none.
  Match FindNext(std::string_view text, size_t from) const;
  // Exact lookup of `content`; -1 when it is not an added token.
  int32_t Lookup(std::string_view content) const;

 private:
  struct Node {
    int32_t id = -1;                                  // token ending here
    std::vector<std::pair<uint8_t, int32_t>> next;    // sorted by byte
  };
  int32_t Child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_next_;  // children of the root, by byte
  std::array<bool, 256> first_byte_{};
};

}  // namespace g4
