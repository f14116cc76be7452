#include "kv/kv_pool_layout.h"

#include <algorithm>
#include <string>

namespace g4 {

StatusOr<KvPoolLayout> KvPoolLayout::Make(const Gemma4Config& config, const KvScheme& scheme, int block_size) {
  if (block_size < 1) return InvalidArgument("[kv] block size must be at least 1, got " + std::to_string(block_size));
  if (static_cast<int>(config.layers.size()) != config.num_hidden_layers)
    return InvalidArgument("[kv] config has " + std::to_string(config.layers.size()) + " layer geometries for " +
                           std::to_string(config.num_hidden_layers) + " layers");
  KvPoolLayout out;
  out.block_size = block_size;
  const int n = config.num_hidden_layers;
  out.layer_group.assign(n, -1);
  out.layer_index.assign(n, -1);
  for (int l = 0; l < n; ++l) {
    const LayerGeometry& g = config.layers[l];
    if (g.kv_shared) continue;
    const int group = g.type == AttentionType::kFull ? 0 : 1;
    out.layer_group[l] = group;
    out.layer_index[l] = static_cast<int>(out.group[group].layers.size());
    out.group[group].layers.push_back(l);
  }
  for (int gi = 0; gi < 2; ++gi) {
    KvGroupLayout& group = out.group[gi];
    group.spec = gi == 0 ? scheme.full : scheme.sliding;
    group.window = gi == 1 && scheme.sliding_ring ? std::max(0, config.sliding_window) : 0;
    if (group.layers.empty()) continue;
    group.num_stores = group.spec.delayed() ? 2 : 1;
    for (int s = 0; s < group.num_stores; ++s) {
      // A delayed group keeps its first tokens plain f32 (store 0).
      const KvCodecSpec codec = group.delayed() && s == 0 ? KvCodecSpec::Plain(DType::kF32) : group.spec.codec;
      KvStoreLayout& store = group.store[s];
      size_t record_bytes = 0;
      for (int l : group.layers) {
        const LayerGeometry& g = config.layers[l];
        auto f = KvRecordFormat::Make(codec, g.num_kv_heads, g.head_dim);
        if (!f.ok())
          return Status(f.status().code(), "[kv] layer " + std::to_string(l) + " (" +
                                               (gi == 0 ? "full" : "sliding") + ", " +
                                               std::to_string(g.num_kv_heads) + " KV heads x " +
                                               std::to_string(g.head_dim) + "): " + f.status().message());
        record_bytes += static_cast<size_t>(f->record_bytes);
        store.formats.push_back(*f);
      }
      store.block_bytes = record_bytes * static_cast<size_t>(block_size);
    }
  }
  for (int l = 0; l < n; ++l) {
    const LayerGeometry& g = config.layers[l];
    if (!g.kv_shared) continue;
    if (g.donor < 0 || g.donor >= n || config.layers[g.donor].kv_shared)
      return InvalidArgument("[kv] layer " + std::to_string(l) + " shares KV with layer " + std::to_string(g.donor) +
                             ", which owns none");
    out.layer_group[l] = out.layer_group[g.donor];
    out.layer_index[l] = out.layer_index[g.donor];
  }
  return out;
}

void KvPoolLayout::WorstCaseBlocks(int64_t tokens, int64_t max_chunk, int64_t out[2][2]) const {
  tokens = std::max<int64_t>(tokens, 0);
  max_chunk = std::max<int64_t>(max_chunk, 1);
  for (int gi = 0; gi < 2; ++gi) {
    const KvGroupLayout& g = group[gi];
    out[gi][0] = out[gi][1] = 0;
    if (!g.used() || tokens == 0) continue;
    int64_t held = BlocksFor(tokens);
    // A ring holds its window plus the chunk being written, plus one block
    // of misalignment.
    if (g.window > 0) held = std::min(held, BlocksFor(g.window + max_chunk) + 1);
    if (!g.delayed()) {
      out[gi][0] = held;
      continue;
    }
    // Plain until the sequence holds `delay` tokens: at most the last chunk
    // before the boundary crosses it (or the first chunk, which is never cut).
    out[gi][0] = std::min(held, BlocksFor(g.spec.delay + max_chunk) + 1);
    out[gi][1] = tokens >= g.spec.delay ? held : 0;
  }
}

int64_t KvPoolLayout::HeldBlocks(int gi, int64_t tokens) const {
  const KvGroupLayout& g = group[gi];
  if (!g.used() || tokens <= 0) return 0;
  if (g.window <= 0) return BlocksFor(tokens);
  const int64_t from = std::max<int64_t>(0, tokens - g.window + 1);  // the next query's first key
  return (tokens - 1) / block_size - from / block_size + 1;
}

}  // namespace g4
