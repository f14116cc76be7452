// KvPool's private state, shared by kv_pool*.cc. Not part of the contract.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/ops.h"
#include "core/check.h"
#include "kv/block_allocator.h"
#include "kv/kv_pool.h"
#include "kv/kv_pool_layout.h"

namespace g4 {

struct KvPool::Impl {
  // One sequence in one group.
  struct SeqGroup {
    // Block of entry i (tokens [i B, (i + 1) B)); -1 = released (only the
    // leading `released` entries of a sliding ring, all below its window).
    std::vector<int32_t> table;
    int64_t released = 0;
    int64_t held = 0;  // entries != -1
    uint8_t store = 0;
    int64_t converted_at = -1;
  };
  struct Seq {
    bool live = false;
    int64_t length = 0;
    SeqGroup group[kNumKvGroups];
  };
  struct Store {
    BlockAllocator blocks;
    std::vector<DeviceBuffer> buffers;  // per layer of the group: (capacity + 1) blocks
    std::vector<PagedKvStore> views;    // per layer of the group
  };

  KvPoolLayout layout;
  Store store[kNumKvGroups][2];
  std::vector<Seq> seqs;  // by KvSeq id
  std::vector<int32_t> free_ids;
  std::map<std::pair<int, int>, DeviceBuffer> constants;  // turbo: (0, value bits) centroids, (1, head_dim) signs

  const KvGroupLayout& group(int g) const { return layout.group[g]; }
  int block_size() const { return layout.block_size; }
  // Bytes of one record of layer `i` of group g in store s.
  int64_t record_bytes(int g, int s, int i) const { return store[g][s].views[i].format.record_bytes; }
  // Start of slot 0 of `block` in layer i's array.
  uint8_t* block_data(int g, int s, int i, int32_t block) const {
    return store[g][s].views[i].records + static_cast<int64_t>(block) * block_size() * record_bytes(g, s, i);
  }
  // The first token the next query of a sequence of `length` tokens sees in
  // group g (0 unless the group is a ring).
  int64_t first_needed(int g, int64_t length) const {
    const int w = group(g).window;
    return w > 0 ? std::max<int64_t>(0, length - w + 1) : 0;
  }

  Seq& seq(int32_t id) {
    G4_CHECK(id >= 0 && static_cast<size_t>(id) < seqs.size() && seqs[id].live);
    return seqs[id];
  }
  const Seq& seq(int32_t id) const {
    G4_CHECK(id >= 0 && static_cast<size_t>(id) < seqs.size() && seqs[id].live);
    return seqs[id];
  }
  int32_t NewId();
  // The largest converted_at of seq's groups (0 when none converted).
  int64_t MinReusable(int32_t id) const;
  // Why seq cannot be cut to n tokens (Fork, Trim), or OK.
  Status CutStatus(int32_t id, int64_t n) const;
  // Drops seq's reference to table entry i of group g (sets it to -1).
  void ReleaseEntry(int32_t id, int g, int64_t i);
  // Drops every entry from `entries` on (Trim).
  void TruncateTable(int32_t id, int g, int64_t entries);
  // Releases the leading entries a sliding ring no longer needs.
  void ReleaseBehindWindow(int32_t id, int g);
};

}  // namespace g4
