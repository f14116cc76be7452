#include "kv/sequence_kv.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace g4 {

StatusOr<std::unique_ptr<SequenceKv>> SequenceKv::Make(const Gemma4Config& config, const KvScheme& scheme) {
  auto s = std::make_unique<SequenceKv>();
  s->scheme_ = scheme;
  s->layers_.resize(config.num_hidden_layers);
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    const LayerGeometry& g = config.layers[l];
    if (g.kv_shared) continue;
    const bool sliding = g.type == AttentionType::kSliding;
    const int window = sliding && scheme.sliding_ring ? config.sliding_window : 0;
    auto cache = MakeLayerCache(sliding ? scheme.sliding : scheme.full, g.num_kv_heads, g.head_dim, window);
    if (!cache.ok()) return cache.status().WithContext("layer " + std::to_string(l));
    s->layers_[l] = std::move(cache).value();
  }
  return s;
}

std::unique_ptr<SequenceKv> SequenceKv::MakePlain(const Gemma4Config& config) {
  auto s = Make(config, KvScheme{});
  G4_CHECK_MSG(s.ok(), s.status().ToString().c_str());
  return std::move(s).value();
}

size_t SequenceKv::allocated_bytes() const {
  size_t total = 0;
  for (const auto& c : layers_)
    if (c) total += c->allocated_bytes();
  return total;
}

size_t SequenceKv::ProjectedBytes(int64_t tokens) const {
  size_t total = 0;
  for (const auto& c : layers_)
    if (c) total += c->ProjectedBytes(tokens);
  return total;
}

int64_t SequenceKv::minimum_reusable_offset() const {
  int64_t m = 0;
  for (const auto& c : layers_)
    if (c && c->reuse()) m = std::max(m, c->reuse()->minimum_reusable_offset());
  return m;
}

bool SequenceKv::trimmable() const {
  for (const auto& c : layers_) {
    if (!c) continue;
    CacheReuse* r = c->reuse();
    if (!r || !r->trimmable()) return false;
  }
  return true;
}

Status SequenceKv::Trim(int64_t n) {
  if (n < 0 || n > position_)
    return InvalidArgument("[kv] cannot trim a sequence of " + std::to_string(position_) + " tokens to " +
                           std::to_string(n));
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!layers_[l]) continue;
    CacheReuse* r = layers_[l]->reuse();
    if (!r) return Unsupported("[kv] layer " + std::to_string(l) + " (" + layers_[l]->signature() + ") cannot trim");
    if (!r->trimmable())
      return InvalidArgument("[kv] layer " + std::to_string(l) + " (" + layers_[l]->signature() +
                             ") cannot trim: its ring has wrapped");
    if (n < r->minimum_reusable_offset())
      return InvalidArgument("[kv] cannot trim to " + std::to_string(n) + ": layer " + std::to_string(l) +
                             " converted precision at " + std::to_string(r->minimum_reusable_offset()));
  }
  for (auto& c : layers_)
    if (c) G4_CHECK(c->reuse()->Trim(n).ok());
  position_ = n;
  return Status::Ok();
}

StatusOr<std::unique_ptr<SequenceKv>> SequenceKv::Clone() const {
  auto s = std::make_unique<SequenceKv>();
  s->scheme_ = scheme_;
  s->position_ = position_;
  s->layers_.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (!layers_[l]) continue;
    CacheReuse* r = layers_[l]->reuse();
    if (!r) return Unsupported("[kv] layer " + std::to_string(l) + " (" + layers_[l]->signature() + ") cannot clone");
    s->layers_[l] = r->Clone();
  }
  return s;
}

int64_t SequenceKv::max_append_tokens() const {
  int64_t m = std::numeric_limits<int64_t>::max();
  for (const auto& c : layers_)
    if (c)
      if (PrecisionMaintenance* p = c->precision_maintenance())
        m = std::min(m, p->max_append_tokens());
  return m;
}

Status SequenceKv::Maintain() {
  for (auto& c : layers_)
    if (c)
      if (PrecisionMaintenance* p = c->precision_maintenance()) G4_RETURN_IF_ERROR(p->Maintain());
  return Status::Ok();
}

Status SequenceKv::SetPositionFromLayers(int64_t position) {
  for (size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l] && layers_[l]->offset() != position)
      return Corrupt("[kv] layer " + std::to_string(l) + " holds " + std::to_string(layers_[l]->offset()) +
                     " tokens, the sequence " + std::to_string(position));
  position_ = position;
  return Status::Ok();
}

}  // namespace g4
