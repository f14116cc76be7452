// CodecCache: a codec over a KvStore layout (kv/caches.h builds them; the
// delayed policy wraps them). Private to src/kv: callers use LayerCache and
// its capabilities.
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_codec.h"
#include "kv/kv_store.h"
#include "kv/layer_cache.h"

namespace g4 {

class CodecCache final : public LayerCache,
                         public DonorCapture,
                         public RepresentationConversion,
                         public CacheReuse,
                         public CachePersistence {
 public:
  CodecCache(std::shared_ptr<const KvCodec> codec, int window);
  CodecCache(std::shared_ptr<const KvCodec> codec, KvStore store);

  KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) override;
  int64_t offset() const override { return store_.offset(); }
  size_t allocated_bytes() const override { return store_.allocated_bytes(); }
  size_t bytes_per_token() const override { return store_.bytes_per_token(); }
  std::string signature() const override;
  size_t ProjectedBytes(int64_t tokens) const override { return store_.ProjectedBytes(tokens); }

  DonorCapture* donor_capture() override { return this; }
  RepresentationConversion* conversion() override { return this; }
  CacheReuse* reuse() override { return this; }
  CachePersistence* persistence() override { return this; }

  DonorRows CaptureDonorRows() const override;
  std::unique_ptr<CapturedKvView> CaptureDonorAttention() const override;
  StatusOr<std::unique_ptr<LayerCache>> ConvertTo(const KvCodecSpec& spec) const override;
  bool trimmable() const override { return store_.trimmable(); }
  Status Trim(int64_t n) override;
  std::unique_ptr<LayerCache> Clone() const override;
  int64_t minimum_reusable_offset() const override { return min_reusable_; }
  void set_minimum_reusable_offset(int64_t n) { min_reusable_ = n; }
  CacheState SaveState() const override;
  Status LoadState(const CacheState& state) override;

  const KvCodec& codec() const { return *codec_; }

 private:
  std::shared_ptr<const KvCodec> codec_;
  KvStore store_;
  int64_t min_reusable_ = 0;
  std::vector<uint8_t> encoded_;  // this step's records before they are stored
  CodecKvView view_;
};

StatusOr<std::unique_ptr<LayerCache>> MakeCodecCache(const KvCodecSpec& spec, int num_kv_heads, int head_dim,
                                                     int window);

}  // namespace g4
