// Open-addressing hash tables for the tokenizer's two hot lookups: merge
// ranks keyed by a packed (left id, right id) pair, and piece -> id keyed by
// strings that live in one arena. std::unordered_map costs a node per entry
// and a pointer chase per probe; these are flat arrays probed linearly.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace g4 {

// uint64 key -> uint64 value. The key ~0 is reserved as the empty marker.
class FlatU64Map {
 public:
  static constexpr uint64_t kEmpty = ~0ull;

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    values_.assign(cap, 0);
    mask_ = cap - 1;
    size_ = 0;
  }
  // Inserts or overwrites.
  void Put(uint64_t key, uint64_t value) {
    if ((size_ + 1) * 2 > keys_.size()) Grow();
    size_t i = Slot(key);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = key;
    values_[i] = value;
  }
  void Prefetch(uint64_t key) const { __builtin_prefetch(&keys_[Slot(key)]); }
  const uint64_t* Find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    size_t i = Slot(key);
    while (true) {
      const uint64_t k = keys_[i];
      if (k == key) return &values_[i];
      if (k == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return size_; }

 private:
  size_t Slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> 20 & mask_; }
  void Grow() {
    std::vector<uint64_t> keys = std::move(keys_), values = std::move(values_);
    Reserve(keys.empty() ? 8 : keys.size());
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) Put(keys[i], values[i]);
  }

  std::vector<uint64_t> keys_, values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// string -> int32 id where the strings are owned elsewhere and reached
// through `piece(id)`. A slot holds the id and 32 bits of the key's hash, so
// a probe touches the strings only on a likely hit.
class PieceIndex {
 public:
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, kEmpty);
    mask_ = cap - 1;
  }
  static uint64_t HashOf(std::string_view s) { return std::hash<std::string_view>()(s) * 0x9E3779B97F4A7C15ull; }
  void Prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[(hash >> 16) & mask_]); }

  // Inserts `id` under `key` unless the key is present; returns the id that
  // holds the key afterwards. The table must have been reserved for all keys.
  template <typename PieceFn>
  int32_t Insert(std::string_view key, int32_t id, const PieceFn& piece) {
    const uint64_t h = HashOf(key);
    const uint64_t tag = h >> 32 << 32;
    size_t i = (h >> 16) & mask_;
    while (slots_[i] != kEmpty) {
      const auto held = static_cast<int32_t>(slots_[i] & 0xFFFFFFFFu);
      if ((slots_[i] & ~0xFFFFFFFFull) == tag && piece(held) == key) return held;
      i = (i + 1) & mask_;
    }
    slots_[i] = tag | static_cast<uint32_t>(id);
    return id;
  }
  template <typename PieceFn>
  int32_t Find(std::string_view key, uint64_t hash, const PieceFn& piece) const {
    if (slots_.empty()) return -1;
    const uint64_t tag = hash >> 32 << 32;
    size_t i = (hash >> 16) & mask_;
    while (slots_[i] != kEmpty) {
      const auto held = static_cast<int32_t>(slots_[i] & 0xFFFFFFFFu);
      if ((slots_[i] & ~0xFFFFFFFFull) == tag && piece(held) == key) return held;
      i = (i + 1) & mask_;
    }
    return -1;
  }
  template <typename PieceFn>
  int32_t Find(std::string_view key, const PieceFn& piece) const {
    return Find(key, HashOf(key), piece);
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are below 2^31, so never a real slot
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
};

}  // namespace g4
