// The per-layer KV cache contract the attention block is written against.
// Attention appends the step's K/V once and gets back a view of everything it
// must attend over; it never asks which concrete class it holds. (Issue 4
// grows this into the full capability set: quantized and rotated views,
// donor capture, precision maintenance, trimming, persistence.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace g4 {

// Plain float32 keys/values to attend over. Key j of KV head h is at
// k + j * stride + h * head_dim; pos[j] is its absolute position. Keys may be
// in any order (rings): masks are computed from positions. Valid until the
// next append to the cache that produced it.
struct KvView {
  const float* k = nullptr;
  const float* v = nullptr;
  const int32_t* pos = nullptr;
  int64_t num_keys = 0;
  int64_t stride = 0;
};

class LayerCache {
 public:
  virtual ~LayerCache() = default;
  // Appends n tokens: k and v are [n, width] (width = kv heads x head dim),
  // pos[n] their absolute positions, ascending and following what is stored.
  virtual KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) = 0;
  // Tokens appended so far (the sequence offset, not what is retained).
  virtual int64_t offset() const = 0;
  // Bytes allocated now.
  virtual size_t allocated_bytes() const = 0;
  // Bytes one more stored token costs (0 once a ring is full).
  virtual size_t bytes_per_token() const = 0;
  // e.g. "kv:plain", "kv:ring:512+kv:plain".
  virtual std::string signature() const = 0;
};

// Keeps every position (full-attention layers).
std::unique_ptr<LayerCache> MakeContiguousCache(int64_t width);
// Keeps the last `window` positions in a ring (sliding layers). During a
// multi-token append the view also holds the older keys the chunk's first
// queries still see.
std::unique_ptr<LayerCache> MakeRingCache(int64_t width, int window);

}  // namespace g4
