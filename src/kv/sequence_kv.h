// SequenceKv: the caches of one sequence, one per layer that owns K/V
// (KV-shared layers have none and read their donor's view).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/config.h"
#include "kv/layer_cache.h"

namespace g4 {

class SequenceKv {
 public:
  // Plain caches: contiguous for full layers, rings of the window for
  // sliding layers, nothing for KV-shared layers.
  static std::unique_ptr<SequenceKv> MakePlain(const Gemma4Config& config);

  LayerCache* layer(int l) { return layers_[l].get(); }  // null for KV-shared layers
  int num_layers() const { return static_cast<int>(layers_.size()); }
  // Tokens already processed: the next token's position.
  int64_t position() const { return position_; }
  void Advance(int64_t n) { position_ += n; }
  size_t allocated_bytes() const;
  // Swaps in another cache for layer l (tests wrap caches to observe them).
  void ReplaceLayer(int l, std::unique_ptr<LayerCache> cache) { layers_[l] = std::move(cache); }
  std::unique_ptr<LayerCache> ReleaseLayer(int l) { return std::move(layers_[l]); }

 private:
  std::vector<std::unique_ptr<LayerCache>> layers_;
  int64_t position_ = 0;
};

}  // namespace g4
