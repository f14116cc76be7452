#include "tokenizer/added_tokens.h"

#include <algorithm>

namespace g4 {

AddedTokenMatcher::AddedTokenMatcher() : nodes_(1) { root_next_.fill(-1); }

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_next_[byte];
  const auto& next = nodes_[node].next;
  auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(byte, INT32_MIN));
  return it != next.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::Add(std::string_view content, int32_t id) {
  if (content.empty()) return;
  int32_t node = 0;
  for (char ch : content) {
    const auto byte = static_cast<uint8_t>(ch);
    int32_t child = Child(node, byte);
    if (child < 0) {
      child = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
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
  first_byte_[static_cast<uint8_t>(content[0])] = true;
}

AddedTokenMatcher::Match AddedTokenMatcher::FindNext(std::string_view text, size_t from) const {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t start = from; start < n; ++start) {
    if (!first_byte_[p[start]]) continue;
    Match best;
    int32_t node = 0;
    for (size_t i = start; i < n; ++i) {
      node = Child(node, p[i]);
      if (node < 0) break;
      if (nodes_[node].id >= 0) best = {start, i + 1, nodes_[node].id};
    }
    if (best.id >= 0) return best;
  }
  return {};
}

int32_t AddedTokenMatcher::Lookup(std::string_view content) const {
  if (content.empty()) return -1;
  int32_t node = 0;
  for (char ch : content) {
    node = Child(node, static_cast<uint8_t>(ch));
    if (node < 0) return -1;
  }
  return nodes_[node].id;
}

}  // namespace g4
