// KvStore: the layout half of a cache. Fixed-size token records (any codec)
// and their positions, either contiguous (every token) or a ring of `window`
// slots (sliding layers: exactly their window, whatever the codec). Token t
// (0-based count of appends) lives in slot t, or t % window in a ring.
//
// Storage grows along a fixed ladder (256, 512, ... 4096, then multiples of
// 4096 tokens; a ring stops at its window), so the bytes held after n tokens
// depend on n only: ProjectedBytes(n) == allocated_bytes() for any sequence
// of appends reaching n. Copies (Clone) share storage copy-on-write: O(1),
// and the first write to shared storage copies it.
//
// Threading: the copy-on-write test reads the share count, so a store and
// its clones must not be written concurrently from different threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"

namespace g4 {

class KvStore {
 public:
  KvStore(int64_t record_bytes, int window);  // window 0 = contiguous

  int64_t record_bytes() const { return record_bytes_; }
  int window() const { return window_; }
  bool is_ring() const { return window_ > 0; }
  int64_t offset() const { return offset_; }
  // Slots holding tokens: offset, or min(offset, window) in a ring.
  int64_t held() const;
  // A ring has overwritten a token (it can no longer be trimmed).
  bool wrapped() const { return is_ring() && offset_ > window_; }
  // "" or "kv:ring:<window>"
  std::string layout_signature() const;

  // Appends n records (consecutive, record_bytes each) at positions pos[n]
  // and returns what this step's queries attend over: the held slots, or
  // for a ring chunk that overwrites keys its first queries still see, a
  // transient copy of [held slots..., new records...].
  EncodedKv Append(const uint8_t* records, const int32_t* pos, int64_t n);
  // The held slots, in slot order; `first` is the oldest.
  EncodedKv Held() const;
  // Slot of the i-th oldest held token.
  int64_t ChronologicalSlot(int64_t i) const;

  bool trimmable() const { return !wrapped(); }
  Status Trim(int64_t n);
  KvStore Clone() const;
  // The same slots and offset with every record replaced by recode(old, new)
  // into records of new_record_bytes.
  template <typename Fn>
  KvStore Recode(int64_t new_record_bytes, Fn&& recode) const {
    KvStore out(new_record_bytes, window_);
    const int64_t h = held();
    out.Reserve(h);
    for (int64_t s = 0; s < h; ++s)
      recode(buf_->records.data() + s * record_bytes_, out.buf_->records.data() + s * new_record_bytes);
    if (h) std::copy(buf_->pos.begin(), buf_->pos.begin() + h, out.buf_->pos.begin());
    out.offset_ = offset_;
    return out;
  }

  size_t allocated_bytes() const;
  size_t ProjectedBytes(int64_t tokens) const;
  size_t bytes_per_token() const { return record_bytes_ + sizeof(int32_t); }
  // Ladder capacity (tokens) for holding n tokens.
  int64_t CapacityFor(int64_t n) const;

  // Persistence: the held slots verbatim (slot order) and back. Restore
  // validates that positions are the consecutive range ending at offset - 1.
  std::vector<uint8_t> HeldRecords() const;
  std::vector<uint8_t> HeldPositions() const;  // int32 little-endian
  Status Restore(int64_t offset, const std::vector<uint8_t>& records, const std::vector<uint8_t>& positions);

 private:
  struct Buffer {
    std::vector<uint8_t> records;
    std::vector<int32_t> pos;
  };
  int64_t capacity() const { return buf_ ? static_cast<int64_t>(buf_->pos.size()) : 0; }
  // Makes storage exclusive and at least CapacityFor(slots) tokens.
  void Reserve(int64_t slots);
  void Write(int64_t slot, const uint8_t* record, int32_t pos);

  int64_t record_bytes_;
  int window_;
  int64_t offset_ = 0;
  std::shared_ptr<Buffer> buf_;
  std::vector<uint8_t> scratch_records_;  // transient ring-chunk views
  std::vector<int32_t> scratch_pos_;
};

}  // namespace g4
