// Added tokens (<bos>, <|turn>, "\n", <unused0>, ...) are found in the raw
// text before normalization and BPE, like HF's AddedVocabulary: scanning left
// to right, the earliest-starting match wins, and among matches starting
// there the longest (aho-corasick LeftmostLongest); matching resumes after it.
//
// Why not a trie walk from every position: with a long added token (50 KB,
// say) whose prefix repeats in the text, each start walks up to the token's
// length, so encoding is O(text x token) (100 KB took 21 s). Instead FindAll
// runs one Aho-Corasick automaton over the *reversed* text with the
// *reversed* tokens: at each position it yields the longest token starting
// there, in O(1) amortized, and a greedy left-to-right pass over those picks
// the matches. O(text + tokens) whatever the tokens; the build is O(total
// token bytes x log 256).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace g4 {

class AddedTokenMatcher {
 public:
  AddedTokenMatcher();
  // Adds `content` -> `id`; a repeated content keeps the later id. Empty
  // content is ignored (HF never matches it). Call Build() after the last Add.
  void Add(std::string_view content, int32_t id);
  // Builds the matching automaton; FindAll needs it. Kept separate from Add
  // so loading N tokens costs one build, and so a built matcher is never
  // mutated again (Encode runs on several threads at once).
  void Build();

  struct Match {
    size_t begin = 0, end = 0;
    int32_t id = -1;
  };
  // Every match of `text`, in order, non-overlapping, leftmost-longest.
  std::vector<Match> FindAll(std::string_view text) const;
  // Exact lookup of `content`; -1 when it is not an added token.
  int32_t Lookup(std::string_view content) const;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Node {
    int32_t id = -1;      // id of the token whose reversed bytes end here
    int32_t depth = 0;    // bytes from the root (a token's length where id >= 0)
    int32_t fail = 0;     // node of the longest proper suffix present in the trie
    int32_t out = -1;     // deepest node on the fail chain (self included) ending a token
    std::vector<std::pair<uint8_t, int32_t>> next;  // children, sorted by byte
  };
  int32_t Child(int32_t node, uint8_t byte) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
  std::vector<Node> nodes_;               // the trie of reversed tokens; 0 is the root
  std::array<int32_t, 256> root_next_{};  // the root's children, by byte
  bool built_ = false;
};

}  // namespace g4
