#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <deque>

#include "core/check.h"

namespace g4 {

AddedTokenMatcher::AddedTokenMatcher() { root_next_.fill(-1); }

void AddedTokenMatcher::Add(std::string_view content, int32_t id) {
  if (content.empty()) return;
  ids_[std::string(content)] = id;
  built_ = false;
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_next_[byte];
  const auto& next = nodes_[node].next;
  auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(byte, INT32_MIN));
  return it != next.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::Build() {
  nodes_.assign(1, Node());
  root_next_.fill(-1);
  // The trie of reversed tokens.
  for (const auto& [content, id] : ids_) {
    int32_t node = 0;
    for (auto it = content.rbegin(); it != content.rend(); ++it) {
      const auto byte = static_cast<uint8_t>(*it);
      int32_t child = Child(node, byte);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        Node n;
        n.depth = nodes_[node].depth + 1;
        nodes_.push_back(std::move(n));
        if (node == 0) {
          root_next_[byte] = child;
        } else {
          auto& next = nodes_[node].next;
          next.insert(std::lower_bound(next.begin(), next.end(), std::make_pair(byte, INT32_MIN)), {byte, child});
        }
      }
      node = child;
    }
    nodes_[node].id = id;
  }
  // Failure and output links, breadth first (a node's fail is shallower).
  std::deque<int32_t> queue;
  for (int b = 0; b < 256; ++b) {
    const int32_t c = root_next_[b];
    if (c < 0) continue;
    nodes_[c].fail = 0;
    nodes_[c].out = nodes_[c].id >= 0 ? c : -1;
    queue.push_back(c);
  }
  while (!queue.empty()) {
    const int32_t u = queue.front();
    queue.pop_front();
    for (const auto& [byte, v] : nodes_[u].next) {
      int32_t f = nodes_[u].fail;
      while (f != 0 && Child(f, byte) < 0) f = nodes_[f].fail;
      const int32_t target = Child(f, byte);
      nodes_[v].fail = target >= 0 ? target : 0;
      nodes_[v].out = nodes_[v].id >= 0 ? v : nodes_[nodes_[v].fail].out;
      queue.push_back(v);
    }
  }
  built_ = true;
}

std::vector<AddedTokenMatcher::Match> AddedTokenMatcher::FindAll(std::string_view text) const {
  G4_CHECK_MSG(built_ || ids_.empty(), "AddedTokenMatcher::Build() not called after Add()");
  std::vector<Match> matches;
  if (ids_.empty() || text.empty()) return matches;
  // Right to left: at position i the automaton has read text[n-1..i]
  // reversed, so the deepest token on its output chain is the longest added
  // token starting at i.
  std::vector<Match> longest_at;  // positions with a match, right to left
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  int32_t state = 0;
  for (size_t i = text.size(); i-- > 0;) {
    const uint8_t byte = p[i];
    int32_t next = Child(state, byte);
    while (next < 0 && state != 0) {
      state = nodes_[state].fail;
      next = Child(state, byte);
    }
    state = next < 0 ? 0 : next;
    const int32_t out = nodes_[state].out;
    if (out >= 0) longest_at.push_back({i, i + static_cast<size_t>(nodes_[out].depth), nodes_[out].id});
  }
  // Left to right: the earliest match not overlapping the previous one wins.
  size_t pos = 0;
  for (auto it = longest_at.rbegin(); it != longest_at.rend(); ++it) {
    if (it->begin < pos) continue;
    matches.push_back(*it);
    pos = it->end;
  }
  return matches;
}

int32_t AddedTokenMatcher::Lookup(std::string_view content) const {
  auto it = ids_.find(content);
  return it == ids_.end() ? -1 : it->second;
}

}  // namespace g4
