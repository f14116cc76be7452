// Building layer caches from a per-layer spec: a codec, a layout (contiguous
// or ring) and a policy (encode from the first token, or stay plain until N
// tokens and then convert once). The concrete classes stay private: callers
// only see LayerCache and its capabilities.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "kv/kv_codec.h"
#include "kv/layer_cache.h"

namespace g4 {

struct LayerKvSpec {
  KvCodecSpec codec;
  // Delayed precision: -1 = encode with `codec` from the first token; N >= 0 =
  // stay plain until the cache holds N tokens, then convert once, at the
  // next append (never inside the first prefill chunk).
  int64_t delay = -1;
  // "kv:plain", "kv:affine:4:64", "kv:turbo:k8v3@512"
  std::string signature() const;
  bool operator==(const LayerKvSpec&) const = default;
};

// window 0 = contiguous; > 0 = ring of that many tokens.
StatusOr<std::unique_ptr<LayerCache>> MakeLayerCache(const LayerKvSpec& spec, int num_kv_heads, int head_dim,
                                                     int window);

// Plain float32 caches (they cannot fail for head_dim a multiple of 32).
std::unique_ptr<LayerCache> MakeContiguousCache(int num_kv_heads, int head_dim);
std::unique_ptr<LayerCache> MakeRingCache(int num_kv_heads, int head_dim, int window);

}  // namespace g4
