// The per-layer KV cache contract the attention block is written against
// (docs/kv-cache.md). Attention appends the step's K/V once and gets back a
// view of everything it must attend over; it never asks which concrete class
// it holds. What else a cache can do is discovered through optional
// capabilities (null = not offered), never switched on by type:
//
//   view-level (KvAttention, reached from the KvView):
//     quantized view       affine planes + format, for kernels of their own
//     rotated-value view   attention left in the codec's rotated V domain,
//                          plus the transform that restores it once per row
//   cache-level (LayerCache):
//     donor capture        owned copies that outlive later appends
//     precision maintenance  tokens left before a precision change; run it
//     conversion           the representation re-encodes itself (a ring's
//                          physical order differs from the logical one)
//     reuse                trim, cheap clone, minimum reusable offset
//     persistence          the state as tensors + metadata, and back
//
// A cache = a codec (numbers <-> bytes, kv_codec.h) x a layout (contiguous
// or ring of fixed-size records, kv_store.h) x a policy (delayed conversion,
// delayed_cache.cc). Every cache states a signature naming all three, e.g.
// "kv:plain", "kv:affine:4:64", "kv:ring:1024+kv:turbo:k8v3@512".
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/status.h"

namespace g4 {

class KvAttention;

// What one step's queries attend over. pos[j] is key j's absolute position;
// keys may be in any order (rings): masks come from positions. The plain
// port (k, v, stride) is set when the keys are float32 (key j of KV head h at
// k + j * stride + h * head_dim). `attention`, when set, is how to attend:
// the model calls it instead of Ops::Attention. A view is valid until the
// next append to (or trim, conversion, destruction of) the cache that made
// it; KV-shared layers attend over their donor's view of the same step.
struct KvView {
  const float* k = nullptr;
  const float* v = nullptr;
  const int32_t* pos = nullptr;
  int64_t num_keys = 0;
  int64_t stride = 0;
  const KvAttention* attention = nullptr;
};

// Quantized view: the affine planes as stored.
struct QuantizedKvView {
  EncodedKv kv;
  AffineKvFormat format;
};

// Rotated-value view: attention whose output is still in the codec's rotated
// value domain, and the transform restoring it. Attention is linear in V, so
// restoring the [queries x heads] output once equals restoring every value.
class RotatedValueView {
 public:
  virtual ~RotatedValueView() = default;
  virtual void AttendRotated(Ops& ops, const AttentionArgs& query) const = 0;
  // out: [rows, head_dim] rows of AttendRotated's output, restored in place.
  virtual void RestoreValues(Ops& ops, float* out, int64_t rows, int head_dim) const = 0;
};

class KvAttention {
 public:
  virtual ~KvAttention() = default;
  // Writes query.out ([num_queries, num_heads, head_dim], original value
  // domain) from the query side of `query` (q, q_pos, num_queries, heads,
  // head_dim, window, scale, out; its k/v/k_pos/num_keys/kv_stride are
  // ignored) over this view's keys.
  virtual void Attend(Ops& ops, const AttentionArgs& query) const = 0;
  virtual const QuantizedKvView* quantized() const { return nullptr; }
  virtual const RotatedValueView* rotated_values() const { return nullptr; }
};

// A view that owns its bytes: survives any later change of its cache.
class CapturedKvView {
 public:
  virtual ~CapturedKvView() = default;
  virtual const KvView& view() const = 0;
};

// Chronological float32 K/V rows ([n, width]) with their positions.
struct DonorRows {
  int64_t width = 0;
  std::vector<float> k, v;
  std::vector<int32_t> pos;
};

class DonorCapture {
 public:
  virtual ~DonorCapture() = default;
  // Decoded keys and values (values in the original domain), oldest first.
  virtual DonorRows CaptureDonorRows() const = 0;
  // The current view, owning a copy of the encoded bytes (no re-encoding).
  virtual std::unique_ptr<CapturedKvView> CaptureDonorAttention() const = 0;
};

class PrecisionMaintenance {
 public:
  virtual ~PrecisionMaintenance() = default;
  // Tokens that can still be appended before the representation changes;
  // int64 max when no change is pending, 0 when one is due. A scheduler sizes
  // chunks by it so a row changes precision at the same token whatever else
  // runs with it.
  virtual int64_t max_append_tokens() const = 0;
  // Performs a due change now (between steps, e.g. one layer at a time to
  // bound the transient); otherwise does nothing. Appends also perform it.
  virtual Status Maintain() = 0;
};

struct KvCodecSpec;
class LayerCache;

class RepresentationConversion {
 public:
  virtual ~RepresentationConversion() = default;
  // A cache with the same layout, positions and offset, holding this one's
  // contents re-encoded with `codec` (this cache is left unchanged).
  virtual StatusOr<std::unique_ptr<LayerCache>> ConvertTo(const KvCodecSpec& codec) const = 0;
};

class CacheReuse {
 public:
  virtual ~CacheReuse() = default;
  // Whether Trim can cut to any n in [minimum_reusable_offset(), offset()]
  // (a ring only until it wraps).
  virtual bool trimmable() const = 0;
  virtual Status Trim(int64_t n) = 0;
  // O(1): shares storage copy-on-write with this cache.
  virtual std::unique_ptr<LayerCache> Clone() const = 0;
  // Prefixes shorter than this cannot resume generation exactly (a delayed
  // conversion at offset X changed the bytes of every earlier token).
  virtual int64_t minimum_reusable_offset() const = 0;
};

// A cache's state as named byte tensors plus string metadata (kv_file.h
// frames, checksums and validates them).
struct CacheState {
  std::map<std::string, std::string> meta;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> tensors;
};

class CachePersistence {
 public:
  virtual ~CachePersistence() = default;
  virtual CacheState SaveState() const = 0;
  // Replaces this (empty, same-signature) cache's contents; on error the
  // cache is unchanged. Every field is validated: the state may come from a
  // file.
  virtual Status LoadState(const CacheState& state) = 0;
};

class LayerCache {
 public:
  virtual ~LayerCache() = default;
  // Appends n tokens: k and v are [n, width] (width = kv heads x head dim),
  // pos[n] their absolute positions, ascending, continuing what is stored.
  virtual KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) = 0;
  // Tokens appended so far (the sequence offset, not what is retained).
  virtual int64_t offset() const = 0;
  // Bytes of storage the cache holds now (transient views excluded).
  virtual size_t allocated_bytes() const = 0;
  // Bytes one more retained token costs at the current precision.
  virtual size_t bytes_per_token() const = 0;
  // e.g. "kv:plain", "kv:ring:512+kv:affine:4:64".
  virtual std::string signature() const = 0;
  // What allocated_bytes() will be once `tokens` tokens have been appended
  // to a fresh cache of this kind (rings stop growing at their window).
  virtual size_t ProjectedBytes(int64_t tokens) const { return static_cast<size_t>(tokens) * bytes_per_token(); }

  virtual DonorCapture* donor_capture() { return nullptr; }
  virtual PrecisionMaintenance* precision_maintenance() { return nullptr; }
  virtual RepresentationConversion* conversion() { return nullptr; }
  virtual CacheReuse* reuse() { return nullptr; }
  virtual CachePersistence* persistence() { return nullptr; }
};

}  // namespace g4
