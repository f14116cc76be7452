// KvPoolLayout: what a KvPool is made of for one config and scheme, before
// any memory exists: the layers of each group, each store's per-layer record
// format and block bytes, and the worst-case block counts admission and
// budgeting reason with. Private to src/kv (KvPool::Create and
// KvPoolOptions::ForBudget share it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/kv_record.h"
#include "core/status.h"
#include "io/config.h"
#include "kv/kv_scheme.h"

namespace g4 {

struct KvStoreLayout {
  std::vector<KvRecordFormat> formats;  // per layer of the group, in KvGroupLayout::layers order
  size_t block_bytes = 0;               // block_size x sum of record bytes
};

struct KvGroupLayout {
  std::vector<int> layers;  // layers owning K/V in this group, ascending
  LayerKvSpec spec;
  // Sliding groups with rings: the attention window; blocks wholly before
  // it are released. 0 = keep every block (full groups, unbounded sliding).
  int window = 0;
  int num_stores = 0;  // 0 (no layers), 1, or 2 (delayed: store 0 plain f32, store 1 the codec)

  bool used() const { return num_stores > 0; }
  bool delayed() const { return num_stores == 2; }
  int final_store() const { return num_stores - 1; }
  KvStoreLayout store[2];
};

struct KvPoolLayout {
  int block_size = 0;
  KvGroupLayout group[2];  // indexed by KvGroup
  // Per model layer: its group (a KV-shared layer: its donor's) and its
  // index in that group's layers; -1 when the layer has no K/V at all.
  std::vector<int> layer_group;
  std::vector<int> layer_index;

  // Fails when a codec does not fit a layer (the message names the layer).
  static StatusOr<KvPoolLayout> Make(const Gemma4Config& config, const KvScheme& scheme, int block_size);

  int64_t BlocksFor(int64_t tokens) const { return (tokens + block_size - 1) / block_size; }
  // The most blocks a fresh sequence holds at once in each (group, store)
  // while it grows to `tokens` tokens in chunks of at most `max_chunk`
  // (kv_pool.h, admission).
  void WorstCaseBlocks(int64_t tokens, int64_t max_chunk, int64_t out[2][2]) const;
  // Blocks a solo sequence holds in group g once it has `tokens` tokens
  // (sliding rings: the blocks still in its window).
  int64_t HeldBlocks(int g, int64_t tokens) const;
};

}  // namespace g4
