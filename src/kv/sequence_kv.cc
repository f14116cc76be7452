#include "kv/sequence_kv.h"

namespace g4 {

std::unique_ptr<SequenceKv> SequenceKv::MakePlain(const Gemma4Config& config) {
  auto s = std::make_unique<SequenceKv>();
  s->layers_.resize(config.num_hidden_layers);
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    const LayerGeometry& g = config.layers[l];
    if (g.kv_shared) continue;
    const int64_t width = static_cast<int64_t>(g.num_kv_heads) * g.head_dim;
    s->layers_[l] = g.type == AttentionType::kSliding ? MakeRingCache(width, config.sliding_window)
                                                      : MakeContiguousCache(width);
  }
  return s;
}

size_t SequenceKv::allocated_bytes() const {
  size_t total = 0;
  for (const auto& c : layers_)
    if (c) total += c->allocated_bytes();
  return total;
}

}  // namespace g4
