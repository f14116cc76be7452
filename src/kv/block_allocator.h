// BlockAllocator: the bookkeeping of one KV block store (kv_pool.h): a free
// list, reference counts, and per-sequence reservations. It owns no memory;
// block ids index the store's per-layer arrays. Private to src/kv.
//
// Ids 1..capacity are handed out; id 0 is the padding block, never handed
// out. A block is in use while its reference count is positive.
//
// Reservations. Each account (a sequence id) may reserve R blocks: the
// largest number it will hold at once. The account is charged for the blocks
// it allocated and still holds; its unused reservation ("pot") is
// max(0, R - charged), and the allocator keeps
//
//     sum of pots <= free blocks,
//
// so an account can always allocate its pot, whatever the others do. An
// allocation draws from the account's pot first and otherwise from the
// unreserved free blocks (free - sum of pots). A block another sequence still
// references (prefix sharing) outlives the account's reference; its charge is
// dropped only when the unreserved free blocks can absorb the pot it gives
// back, else it stays on the account until the block is freed.
//
// Threading: none (the pool's one thread).
#pragma once

#include <cstdint>
#include <vector>

namespace g4 {

class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t capacity = 0);

  int64_t capacity() const { return capacity_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t in_use() const { return capacity_ - free_blocks(); }
  // Sum of the accounts' unused reservations.
  int64_t reserved() const { return reserved_; }
  // Free blocks nobody has reserved.
  int64_t unreserved_free() const { return free_blocks() - reserved_; }
  int32_t refcount(int32_t block) const { return refcount_[block]; }

  // Whether `account` can allocate n more blocks now.
  bool CanAllocate(int32_t account, int64_t n) const;
  // A block with reference count 1, charged to `account`.
  // REQUIRES: CanAllocate(account, 1).
  int32_t Allocate(int32_t account);
  void AddRef(int32_t block);
  // Drops one reference `account` held; frees the block at zero.
  void Release(int32_t account, int32_t block);

  // Sets the account's reservation to `blocks` (replacing any earlier one).
  // False, and nothing changes, when the unreserved free blocks cannot cover
  // the larger pot.
  bool SetReservation(int32_t account, int64_t blocks);
  bool CanReserve(int32_t account, int64_t blocks) const;
  int64_t reservation(int32_t account) const;
  // Ends an account whose references were all released: its reservation
  // returns to the pool and charges left on blocks others still hold are
  // dropped (the id may be reused).
  void CloseAccount(int32_t account);

 private:
  struct Account {
    int64_t reserved = 0;  // R
    int64_t charged = 0;   // blocks allocated by the account and still charged to it
  };
  static int64_t Pot(const Account& a) { return a.reserved > a.charged ? a.reserved - a.charged : 0; }
  Account& account(int32_t id);
  // Drops one charge from `id` if the pool can cover the pot it frees.
  bool Uncharge(int32_t id);

  int64_t capacity_;
  std::vector<int32_t> free_;        // a stack: the most recently freed block is reused first
  std::vector<int32_t> refcount_;    // [capacity + 1]
  std::vector<int32_t> charged_to_;  // [capacity + 1]: the account charged for the block, or -1
  std::vector<Account> accounts_;    // by account id
  int64_t reserved_ = 0;             // sum of pots
};

}  // namespace g4
