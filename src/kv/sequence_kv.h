// SequenceKv: the caches of one sequence, one per layer that owns K/V
// (KV-shared layers have none and attend over their donor's view), built
// from a KvScheme. Sequence-level reuse (trim, clone) and accounting are the
// layer capabilities applied to every layer, all or nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/config.h"
#include "kv/kv_scheme.h"
#include "kv/layer_cache.h"

namespace g4 {

class SequenceKv {
 public:
  // Plain caches: contiguous for full layers, rings of the window for
  // sliding layers, nothing for KV-shared layers.
  static std::unique_ptr<SequenceKv> MakePlain(const Gemma4Config& config);
  // Caches per `scheme`; fails when a codec does not fit a layer's geometry.
  // Nothing is allocated until the first append.
  static StatusOr<std::unique_ptr<SequenceKv>> Make(const Gemma4Config& config, const KvScheme& scheme);

  LayerCache* layer(int l) { return layers_[l].get(); }  // null for KV-shared layers
  const LayerCache* layer(int l) const { return layers_[l].get(); }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  // Tokens already processed: the next token's position.
  int64_t position() const { return position_; }
  void Advance(int64_t n) { position_ += n; }
  const KvScheme& scheme() const { return scheme_; }

  size_t allocated_bytes() const;
  // Bytes all layers hold once `tokens` tokens have been appended.
  size_t ProjectedBytes(int64_t tokens) const;

  // Reuse: the largest minimum reusable offset of any layer; whether every
  // layer can trim; Trim cuts every layer and the position to n, or changes
  // nothing and says why.
  int64_t minimum_reusable_offset() const;
  bool trimmable() const;
  Status Trim(int64_t n);
  StatusOr<std::unique_ptr<SequenceKv>> Clone() const;
  // The fewest tokens any layer can take before changing precision.
  int64_t max_append_tokens() const;
  Status Maintain();

  // Swaps in another cache for layer l (tests wrap caches to observe them).
  void ReplaceLayer(int l, std::unique_ptr<LayerCache> cache) { layers_[l] = std::move(cache); }
  std::unique_ptr<LayerCache> ReleaseLayer(int l) { return std::move(layers_[l]); }
  // Restores the position (persistence; every layer must hold exactly it).
  Status SetPositionFromLayers(int64_t position);

 private:
  std::vector<std::unique_ptr<LayerCache>> layers_;
  int64_t position_ = 0;
  KvScheme scheme_;
};

}  // namespace g4
