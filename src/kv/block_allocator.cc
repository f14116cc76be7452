#include "kv/block_allocator.h"

#include <algorithm>

#include "core/check.h"

namespace g4 {

BlockAllocator::BlockAllocator(int64_t capacity)
    : capacity_(capacity), refcount_(capacity + 1, 0), charged_to_(capacity + 1, -1) {
  G4_CHECK(capacity >= 0 && capacity < INT32_MAX);
  free_.reserve(capacity);
  // Popped from the back: block 1 first.
  for (int64_t b = capacity; b >= 1; --b) free_.push_back(static_cast<int32_t>(b));
}

BlockAllocator::Account& BlockAllocator::account(int32_t id) {
  G4_CHECK(id >= 0);
  if (static_cast<size_t>(id) >= accounts_.size()) accounts_.resize(id + 1);
  return accounts_[id];
}

bool BlockAllocator::CanAllocate(int32_t id, int64_t n) const {
  const int64_t pot = static_cast<size_t>(id) < accounts_.size() ? Pot(accounts_[id]) : 0;
  return n - std::min(n, pot) <= unreserved_free();
}

int32_t BlockAllocator::Allocate(int32_t id) {
  G4_CHECK(CanAllocate(id, 1));
  Account& a = account(id);
  const int32_t b = free_.back();
  free_.pop_back();
  G4_CHECK(refcount_[b] == 0 && charged_to_[b] < 0);
  refcount_[b] = 1;
  charged_to_[b] = id;
  if (Pot(a) > 0) --reserved_;
  ++a.charged;
  return b;
}

void BlockAllocator::AddRef(int32_t b) {
  G4_CHECK(b >= 1 && b <= capacity_ && refcount_[b] > 0);
  ++refcount_[b];
}

bool BlockAllocator::Uncharge(int32_t id) {
  Account& a = account(id);
  G4_CHECK(a.charged > 0);
  const int64_t grows = a.charged <= a.reserved ? 1 : 0;  // the pot grows by one
  if (reserved_ + grows > free_blocks()) return false;
  --a.charged;
  reserved_ += grows;
  return true;
}

void BlockAllocator::Release(int32_t id, int32_t b) {
  G4_CHECK(b >= 1 && b <= capacity_ && refcount_[b] > 0);
  if (--refcount_[b] == 0) {
    free_.push_back(b);
    if (charged_to_[b] >= 0) G4_CHECK(Uncharge(charged_to_[b]));  // the freed block covers it
    charged_to_[b] = -1;
  } else if (charged_to_[b] == id && Uncharge(id)) {
    charged_to_[b] = -1;  // others still hold it, unreserved
  }
}

bool BlockAllocator::CanReserve(int32_t id, int64_t blocks) const {
  Account a = static_cast<size_t>(id) < accounts_.size() ? accounts_[id] : Account{};
  const int64_t before = Pot(a);
  a.reserved = blocks;
  return Pot(a) - before <= unreserved_free();
}

bool BlockAllocator::SetReservation(int32_t id, int64_t blocks) {
  G4_CHECK(blocks >= 0);
  if (!CanReserve(id, blocks)) return false;
  Account& a = account(id);
  const int64_t before = Pot(a);
  a.reserved = blocks;
  reserved_ += Pot(a) - before;
  return true;
}

int64_t BlockAllocator::reservation(int32_t id) const {
  return static_cast<size_t>(id) < accounts_.size() ? accounts_[id].reserved : 0;
}

void BlockAllocator::CloseAccount(int32_t id) {
  if (static_cast<size_t>(id) >= accounts_.size()) return;
  Account& a = accounts_[id];
  reserved_ -= Pot(a);
  if (a.charged > 0)
    for (int32_t& owner : charged_to_)
      if (owner == id) owner = -1;
  a = Account{};
}

}  // namespace g4
