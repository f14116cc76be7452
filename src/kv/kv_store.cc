#include "kv/kv_store.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace g4 {
namespace {
constexpr int64_t kFirstStep = 256;
constexpr int64_t kLinearStep = 4096;
}  // namespace

KvStore::KvStore(int64_t record_bytes, int window) : record_bytes_(record_bytes), window_(window) {
  G4_CHECK(record_bytes > 0 && window >= 0);
}

int64_t KvStore::held() const { return is_ring() ? std::min<int64_t>(offset_, window_) : offset_; }

std::string KvStore::layout_signature() const { return is_ring() ? "kv:ring:" + std::to_string(window_) : ""; }

int64_t KvStore::CapacityFor(int64_t n) const {
  if (is_ring()) n = std::min<int64_t>(n, window_);
  if (n <= 0) return 0;
  int64_t c = kFirstStep;
  while (c < n && c < kLinearStep) c *= 2;
  if (c < n) c = (n + kLinearStep - 1) / kLinearStep * kLinearStep;
  return is_ring() ? std::min<int64_t>(c, window_) : c;
}

size_t KvStore::allocated_bytes() const { return static_cast<size_t>(capacity()) * bytes_per_token(); }

size_t KvStore::ProjectedBytes(int64_t tokens) const {
  return static_cast<size_t>(CapacityFor(tokens)) * bytes_per_token();
}

void KvStore::Reserve(int64_t slots) {
  const int64_t want = std::max(capacity(), CapacityFor(slots));
  if (buf_ && buf_.use_count() == 1 && capacity() == want) return;
  auto fresh = std::make_shared<Buffer>();
  fresh->records.resize(want * record_bytes_);
  fresh->pos.resize(want, -1);
  if (buf_) {
    const int64_t h = std::min(held(), want);
    std::memcpy(fresh->records.data(), buf_->records.data(), h * record_bytes_);
    std::copy(buf_->pos.begin(), buf_->pos.begin() + h, fresh->pos.begin());
  }
  buf_ = std::move(fresh);
}

void KvStore::Write(int64_t slot, const uint8_t* record, int32_t pos) {
  std::memcpy(buf_->records.data() + slot * record_bytes_, record, record_bytes_);
  buf_->pos[slot] = pos;
}

EncodedKv KvStore::Append(const uint8_t* records, const int32_t* pos, int64_t n) {
  G4_CHECK(n > 0);
  if (!is_ring() || n == 1 || offset_ + n <= window_) {
    Reserve(is_ring() ? std::min<int64_t>(offset_ + n, window_) : offset_ + n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = offset_ + i;
      Write(is_ring() ? t % window_ : t, records + i * record_bytes_, pos[i]);
    }
    offset_ += n;
    return Held();
  }
  // A ring chunk that wraps: its first queries still see keys the ring is
  // about to overwrite, so they attend over [held..., new...] in scratch,
  // oldest first.
  const int64_t h = held();
  scratch_records_.resize((h + n) * record_bytes_);
  scratch_pos_.resize(h + n);
  for (int64_t i = 0; i < h; ++i) {
    const int64_t s = ChronologicalSlot(i);
    std::memcpy(scratch_records_.data() + i * record_bytes_, buf_->records.data() + s * record_bytes_, record_bytes_);
    scratch_pos_[i] = buf_->pos[s];
  }
  std::memcpy(scratch_records_.data() + h * record_bytes_, records, n * record_bytes_);
  std::copy(pos, pos + n, scratch_pos_.begin() + h);
  Reserve(window_);
  for (int64_t i = std::max<int64_t>(0, n - window_); i < n; ++i)
    Write((offset_ + i) % window_, records + i * record_bytes_, pos[i]);
  offset_ += n;
  return EncodedKv{scratch_records_.data(), record_bytes_, scratch_pos_.data(), h + n, 0};
}

EncodedKv KvStore::Held() const {
  if (!buf_) return EncodedKv{nullptr, record_bytes_, nullptr, 0, 0};
  return EncodedKv{buf_->records.data(), record_bytes_, buf_->pos.data(), held(), ChronologicalSlot(0)};
}

int64_t KvStore::ChronologicalSlot(int64_t i) const {
  if (!wrapped()) return i;
  return (offset_ + i) % window_;  // the oldest held token sits where the next one goes
}

Status KvStore::Trim(int64_t n) {
  if (n < 0 || n > offset_)
    return InvalidArgument("[kv] cannot trim to " + std::to_string(n) + " tokens: cache holds " +
                           std::to_string(offset_));
  if (wrapped()) return InvalidArgument("[kv] a ring that has wrapped cannot be trimmed");
  offset_ = n;
  return Status::Ok();
}

KvStore KvStore::Clone() const {
  KvStore c(record_bytes_, window_);
  c.offset_ = offset_;
  c.buf_ = buf_;
  return c;
}

std::vector<uint8_t> KvStore::HeldRecords() const {
  std::vector<uint8_t> out(held() * record_bytes_);
  if (!out.empty()) std::memcpy(out.data(), buf_->records.data(), out.size());
  return out;
}

std::vector<uint8_t> KvStore::HeldPositions() const {
  std::vector<uint8_t> out(held() * sizeof(int32_t));
  for (int64_t s = 0; s < held(); ++s) {
    const uint32_t p = static_cast<uint32_t>(buf_->pos[s]);
    for (int b = 0; b < 4; ++b) out[s * 4 + b] = static_cast<uint8_t>(p >> (8 * b));
  }
  return out;
}

Status KvStore::Restore(int64_t offset, const std::vector<uint8_t>& records, const std::vector<uint8_t>& positions) {
  if (offset < 0 || offset > INT32_MAX) return Corrupt("[kv] offset " + std::to_string(offset) + " out of range");
  KvStore next(record_bytes_, window_);
  next.offset_ = offset;
  const int64_t h = next.held();
  if (static_cast<int64_t>(records.size()) != h * record_bytes_ ||
      static_cast<int64_t>(positions.size()) != h * 4)
    return Corrupt("[kv] layer state sizes disagree with its offset " + std::to_string(offset) + " (records " +
                   std::to_string(records.size()) + " bytes, positions " + std::to_string(positions.size()) +
                   " bytes, " + std::to_string(h) + " tokens of " + std::to_string(record_bytes_) + " bytes expected)");
  if (h) {
    next.Reserve(h);
    std::memcpy(next.buf_->records.data(), records.data(), records.size());
    for (int64_t s = 0; s < h; ++s) {
      uint32_t p = 0;
      for (int b = 0; b < 4; ++b) p |= static_cast<uint32_t>(positions[s * 4 + b]) << (8 * b);
      next.buf_->pos[s] = static_cast<int32_t>(p);
    }
    for (int64_t i = 0; i < h; ++i)
      if (next.buf_->pos[next.ChronologicalSlot(i)] != offset - h + i)
        return Corrupt("[kv] stored positions are not the tokens " + std::to_string(offset - h) + ".." +
                       std::to_string(offset - 1));
  }
  *this = std::move(next);
  return Status::Ok();
}

}  // namespace g4
