// KvPool: the K/V of every sequence, as fixed-size blocks in backend memory
// (vLLM's paged KV, with g4's codecs and delayed precision).
//
// Layers that own K/V form two groups, full-attention and sliding. A group
// has one or two block stores: store 0 in the scheme's codec, or, for a
// delayed scheme (`CODEC@N`), store 0 plain f32 and store 1 in CODEC. A block
// id of a store names `block_size` token slots in every layer of its group
// (each layer has its own storage array, records per kv_record.h), so one
// block table per sequence and group serves all its layers. KV-shared
// layers read their donor's storage through the same tables.
//
// A sequence (KvSeq) holds, per group, the block ids of its tokens in order
// (token p in entry p / block_size), the store they live in, and its length.
// Blocks are reference counted: Fork shares a prefix by reference, and the
// first write into a shared block copies it (copy-on-write of a partly
// filled last block). Sliding groups release blocks whose tokens every
// later query is past (all positions <= length - window), so between steps a
// sliding layer holds at most its window plus one block per sequence.
//
// Accounting is exact: used_bytes() == sum over stores of blocks in use x
// block bytes, shared blocks counted once. Storage is reserved at creation
// (the CPU backend commits pages on first touch).
//
// A step: for each sequence, PrepareAppend(seq, n) makes room for its n new
// tokens (allocating, copying shared blocks), FillTables writes the step's
// block tables, the model writes and attends, Commit(seq, n) advances the
// sequence and releases what fell out of the window. Between steps,
// Maintain(seq) performs a due precision change; max_append_tokens(seq)
// tells a scheduler how to size chunks so it lands at the same token as in a
// solo run.
//
// Threading: one thread at a time (the scheduler's).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/ops.h"
#include "core/status.h"
#include "io/config.h"
#include "kv/kv_scheme.h"

namespace g4 {

class KvPool;

enum class KvGroup : int { kFull = 0, kSliding = 1 };
constexpr int kNumKvGroups = 2;

// A sequence's handle. Move-only; releases its blocks when destroyed. The
// pool must outlive it.
class KvSeq {
 public:
  KvSeq() = default;
  KvSeq(KvSeq&& o) noexcept;
  KvSeq& operator=(KvSeq&& o) noexcept;
  KvSeq(const KvSeq&) = delete;
  KvSeq& operator=(const KvSeq&) = delete;
  ~KvSeq();

  bool valid() const { return pool_ != nullptr; }
  int32_t id() const { return id_; }
  // Tokens stored: the next token's position.
  int64_t length() const;

 private:
  friend class KvPool;
  KvSeq(KvPool* pool, int32_t id) : pool_(pool), id_(id) {}
  KvPool* pool_ = nullptr;
  int32_t id_ = -1;
};

struct KvPoolOptions {
  int block_size = 16;  // tokens per block
  // Blocks per (group, store); 0 = none. KvPoolOptions::ForBudget fills
  // these from a byte budget.
  int64_t capacity_blocks[kNumKvGroups][2] = {{0, 0}, {0, 0}};

  // Splits `budget_bytes` over the stores a scheme needs: sliding stores and
  // delayed plain stores get what `max_seqs` sequences stepping `max_chunk`
  // tokens at a time can hold at once; full stores share the rest.
  static StatusOr<KvPoolOptions> ForBudget(const Gemma4Config& config, const KvScheme& scheme, size_t budget_bytes,
                                           int max_seqs, int64_t max_chunk, int block_size = 16);
};

class KvPool {
 public:
  // Fails when a codec does not fit a layer's geometry (the message names
  // the layer) or the storage cannot be allocated. `backend` must outlive
  // the pool.
  static StatusOr<std::unique_ptr<KvPool>> Create(const Gemma4Config& config, const KvScheme& scheme,
                                                  Backend& backend, const KvPoolOptions& options);
  ~KvPool();

  const KvScheme& scheme() const { return scheme_; }
  int block_size() const { return options_.block_size; }

  // --- sequences
  KvSeq NewSequence();
  // A new sequence sharing the first `tokens` tokens of `seq` by reference.
  // InvalidArgument when seq cannot be cut there (below its minimum reusable
  // offset, or a sliding block it would need was released).
  StatusOr<KvSeq> Fork(const KvSeq& seq, int64_t tokens);
  int64_t length(const KvSeq& seq) const;
  // Cuts seq to n tokens (same conditions as Fork), releasing blocks.
  Status Trim(KvSeq& seq, int64_t n);
  // Whether seq can be cut to n tokens (Fork / Trim).
  bool CanCut(const KvSeq& seq, int64_t n) const;
  // Prefixes shorter than this cannot resume exactly: a delayed precision
  // change at offset X re-encoded every earlier token.
  int64_t minimum_reusable_offset(const KvSeq& seq) const;

  // --- admission
  // Blocks per (group, store) a fresh sequence needs to reach `tokens`
  // tokens stepping at most `max_chunk` at a time, and whether they are free
  // now (beyond what is reserved).
  bool CanAdmit(int64_t tokens, int64_t max_chunk) const;
  // Whether a sequence of `tokens` could ever fit in an empty pool.
  bool CouldEverFit(int64_t tokens, int64_t max_chunk) const;
  // Sets aside the blocks seq needs to reach `tokens` tokens; released with
  // the sequence. ResourceExhausted when they are not free.
  Status Reserve(KvSeq& seq, int64_t tokens, int64_t max_chunk);

  // --- a step
  // Makes room for positions [length, length + n): allocates blocks and
  // copies a shared block about to be written. ResourceExhausted (seq
  // unchanged) when the pool is full.
  Status PrepareAppend(KvSeq& seq, int64_t n);
  // Widest block table among seqs for a group (entries a step table needs).
  int64_t TableWidth(std::span<const KvSeq* const> seqs, KvGroup group) const;
  // Host block tables for a step: table [seqs.size(), stride] (-1 padded),
  // store [seqs.size()].
  void FillTables(std::span<const KvSeq* const> seqs, KvGroup group, int32_t* table, int64_t stride,
                  uint8_t* store) const;
  // The stores layer l reads and writes (its donor's for a KV-shared
  // layer) with the given step tables.
  PagedKv LayerKv(int layer, const KvStepTables& tables) const;
  KvGroup group_of_layer(int layer) const;
  // After the step wrote positions [length, length + n): advances seq and
  // releases sliding blocks out of the window.
  void Commit(KvSeq& seq, int64_t n);

  // --- delayed precision
  // Tokens seq can still take before a precision change (int64 max when
  // none is pending, 0 when one is due). The change lands at exactly the
  // scheme's N tokens, whatever the chunking (an empty sequence's first
  // chunk is cut there too), so it happens at the same token alone or in
  // any batch.
  int64_t max_append_tokens(const KvSeq& seq) const;
  // Performs a due change (re-encodes seq's blocks into store 1); otherwise
  // does nothing. ResourceExhausted (seq unchanged) when store 1 is full.
  Status Maintain(KvSeq& seq);
  // The offset at which seq changed precision in a group (-1 = not yet, or
  // the group is not delayed). Groups convert at their own boundaries.
  int64_t converted_at(const KvSeq& seq, KvGroup group) const;

  // --- accounting
  size_t used_bytes() const;
  size_t capacity_bytes() const;
  int64_t blocks_in_use(KvGroup group, int store) const;
  int64_t free_blocks(KvGroup group, int store) const;
  int64_t capacity_blocks(KvGroup group, int store) const;
  // Bytes of one block of a store (all layers of the group).
  size_t block_bytes(KvGroup group, int store) const;
  // Blocks seq references in a group (shared ones included).
  int64_t blocks_held(const KvSeq& seq, KvGroup group) const;
  // The bytes one more token of a fresh sequence costs at the scheme's final
  // precision, summed over layers (for reports).
  size_t bytes_per_token() const;
  // Bytes a solo sequence of `tokens` tokens occupies once done (sliding
  // groups capped at their window, rounded up to blocks).
  size_t ProjectedBytes(int64_t tokens) const;

  // --- persistence (kv_file.h frames these)
  // Per layer that owns K/V: signature, and the records of the tokens seq
  // still holds there, oldest first (a sliding layer: at least the last
  // window - 1 tokens).
  struct LayerRecords {
    int layer = 0;
    std::string signature;  // the store's codec, e.g. "kv:affine:4:64"
    int64_t first_token = 0;
    std::vector<uint8_t> records;
  };
  std::vector<LayerRecords> Export(const KvSeq& seq) const;
  // A new sequence of `length` tokens from exported records (validated:
  // signatures, sizes, coverage; converted_at, per group as converted_at()
  // reports it, selects the store). On error the pool is unchanged.
  StatusOr<KvSeq> Import(const std::vector<LayerRecords>& layers, int64_t length,
                         const std::array<int64_t, kNumKvGroups>& converted_at);

  Backend& backend() const { return *backend_; }
  const Gemma4Config& config() const { return config_; }

 private:
  friend class KvSeq;
  KvPool() = default;
  void Release(int32_t id);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Gemma4Config config_;
  KvScheme scheme_;
  KvPoolOptions options_;
  Backend* backend_ = nullptr;
};

}  // namespace g4
