// KvPoolOptions::ForBudget: block counts per store from a byte budget.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "kv/kv_pool.h"
#include "kv/kv_pool_layout.h"

namespace g4 {

StatusOr<KvPoolOptions> KvPoolOptions::ForBudget(const Gemma4Config& config, const KvScheme& scheme,
                                                 size_t budget_bytes, int max_seqs, int64_t max_chunk,
                                                 int block_size) {
  if (max_seqs < 1 || max_chunk < 1)
    return InvalidArgument("[kv] a KV budget needs max_seqs and max_chunk of at least 1, got " +
                           std::to_string(max_seqs) + " and " + std::to_string(max_chunk));
  G4_ASSIGN_OR_RETURN(KvPoolLayout layout, KvPoolLayout::Make(config, scheme, block_size));
  KvPoolOptions options;
  options.block_size = block_size;
  // Stores whose per-sequence need is bounded (rings, the plain phase of a
  // delayed scheme) get it for every sequence; the others (full-length
  // stores) share what is left, as the same number of blocks each so they
  // hold the same number of tokens. Every store also has its padding block.
  size_t fixed = 0, rest_block_bytes = 0;
  bool rest[2][2] = {{false, false}, {false, false}};
  for (int g = 0; g < kNumKvGroups; ++g) {
    const KvGroupLayout& gl = layout.group[g];
    for (int s = 0; s < gl.num_stores; ++s) {
      const size_t bb = gl.store[s].block_bytes;
      int64_t per_seq = -1;  // unbounded
      if (gl.window > 0) per_seq = layout.BlocksFor(gl.window + max_chunk) + 1;
      if (gl.delayed() && s == 0) {
        const int64_t plain = layout.BlocksFor(gl.spec.delay + max_chunk) + 1;
        per_seq = per_seq < 0 ? plain : std::min(per_seq, plain);
      }
      fixed += bb;  // block 0
      if (per_seq < 0) {
        rest[g][s] = true;
        rest_block_bytes += bb;
        continue;
      }
      options.capacity_blocks[g][s] = per_seq * max_seqs;
      fixed += static_cast<size_t>(options.capacity_blocks[g][s]) * bb;
    }
  }
  if (fixed > budget_bytes || (rest_block_bytes > 0 && budget_bytes - fixed < rest_block_bytes))
    return ResourceExhausted("[kv] a KV budget of " + std::to_string(budget_bytes) + " bytes is too small: " +
                             std::to_string(max_seqs) + " sequences stepping " + std::to_string(max_chunk) +
                             " tokens need " + std::to_string(fixed) + " bytes for their windows and plain phases" +
                             (rest_block_bytes ? " plus " + std::to_string(rest_block_bytes) + " per full-length block"
                                               : std::string()));
  if (rest_block_bytes > 0) {
    // Block ids are int32.
    const int64_t blocks = static_cast<int64_t>(std::min<size_t>(
        (budget_bytes - fixed) / rest_block_bytes, std::numeric_limits<int32_t>::max() - 1));
    for (int g = 0; g < kNumKvGroups; ++g)
      for (int s = 0; s < 2; ++s)
        if (rest[g][s]) options.capacity_blocks[g][s] = blocks;
  }
  return options;
}

}  // namespace g4
