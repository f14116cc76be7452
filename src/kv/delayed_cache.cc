// The delayed-precision policy: a plain cache that converts itself once to a
// target codec when it holds N tokens (at the next append, so never inside
// the first prefill chunk, or earlier through Maintain()). The conversion is
// owned by the representation (RepresentationConversion), so the layout's
// slots and positions are kept. The boundary depends only on this cache's
// own token count, never on what else runs in the same batch. After
// converting at offset X, prefixes shorter than X no longer match a fresh
// run, so X becomes the minimum reusable offset.
#include <limits>

#include "core/check.h"
#include "kv/caches.h"
#include "kv/codec_cache.h"

namespace g4 {
namespace {

class DelayedCache final : public LayerCache,
                           public PrecisionMaintenance,
                           public DonorCapture,
                           public CacheReuse,
                           public CachePersistence {
 public:
  DelayedCache(std::unique_ptr<LayerCache> inner, std::unique_ptr<LayerCache> target_probe, LayerKvSpec spec,
               std::string layout)
      : inner_(std::move(inner)), probe_(std::move(target_probe)), spec_(spec), layout_(std::move(layout)) {}

  KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) override {
    if (Due()) {
      const Status s = Maintain();
      G4_CHECK_MSG(s.ok(), s.ToString().c_str());  // the codec was validated when the cache was built
    }
    return inner_->AppendAndView(k, v, pos, n);
  }
  int64_t offset() const override { return inner_->offset(); }
  size_t allocated_bytes() const override { return inner_->allocated_bytes(); }
  size_t bytes_per_token() const override { return inner_->bytes_per_token(); }
  std::string signature() const override {
    return (layout_.empty() ? "" : layout_ + "+") + spec_.signature();
  }
  // For a fresh cache fed in chunks that respect max_append_tokens(): plain
  // up to the boundary, the target's bytes past it (the conversion releases
  // the plain buffer).
  size_t ProjectedBytes(int64_t tokens) const override {
    if (tokens <= spec_.delay) return PlainProjected(tokens);
    return probe_->ProjectedBytes(tokens);
  }

  PrecisionMaintenance* precision_maintenance() override { return this; }
  DonorCapture* donor_capture() override { return inner_->donor_capture() ? this : nullptr; }
  RepresentationConversion* conversion() override { return inner_->conversion(); }
  CacheReuse* reuse() override { return inner_->reuse() ? this : nullptr; }
  CachePersistence* persistence() override { return inner_->persistence() ? this : nullptr; }

  int64_t max_append_tokens() const override {
    if (converted_at_ >= 0 || offset() == 0) return std::numeric_limits<int64_t>::max();
    return std::max<int64_t>(0, spec_.delay - offset());
  }
  Status Maintain() override {
    if (!Due()) return Status::Ok();
    G4_ASSIGN_OR_RETURN(std::unique_ptr<LayerCache> converted, inner_->conversion()->ConvertTo(spec_.codec));
    converted_at_ = inner_->offset();
    static_cast<CodecCache*>(converted.get())->set_minimum_reusable_offset(converted_at_);
    inner_ = std::move(converted);
    return Status::Ok();
  }

  DonorRows CaptureDonorRows() const override { return inner_->donor_capture()->CaptureDonorRows(); }
  std::unique_ptr<CapturedKvView> CaptureDonorAttention() const override {
    return inner_->donor_capture()->CaptureDonorAttention();
  }

  bool trimmable() const override { return inner_->reuse()->trimmable(); }
  Status Trim(int64_t n) override { return inner_->reuse()->Trim(n); }
  std::unique_ptr<LayerCache> Clone() const override {
    auto c = std::make_unique<DelayedCache>(inner_->reuse()->Clone(), probe_->reuse()->Clone(), spec_, layout_);
    c->converted_at_ = converted_at_;
    return c;
  }
  int64_t minimum_reusable_offset() const override { return inner_->reuse()->minimum_reusable_offset(); }

  CacheState SaveState() const override {
    CacheState st = inner_->persistence()->SaveState();
    st.meta["inner_signature"] = st.meta["signature"];
    st.meta["signature"] = signature();
    st.meta["converted_at"] = std::to_string(converted_at_);
    return st;
  }
  Status LoadState(const CacheState& state) override {
    auto get = [&](const char* key) -> const std::string* {
      auto it = state.meta.find(key);
      return it == state.meta.end() ? nullptr : &it->second;
    };
    const std::string* sig = get("signature");
    const std::string* inner_sig = get("inner_signature");
    const std::string* at = get("converted_at");
    if (!sig || *sig != signature())
      return InvalidArgument("[kv] layer state is for '" + (sig ? *sig : std::string("?")) + "', this cache is '" +
                             signature() + "'");
    if (!inner_sig || !at) return Corrupt("[kv] delayed layer state lacks inner_signature or converted_at");
    const bool converted = *at != "-1";
    int64_t converted_at = -1;
    if (converted) {
      if (at->empty() || at->size() > 18 || at->find_first_not_of("0123456789") != std::string::npos)
        return Corrupt("[kv] delayed layer state: bad converted_at '" + *at + "'");
      converted_at = std::stoll(*at);
      if (converted_at < spec_.delay || converted_at == 0)
        return Corrupt("[kv] delayed layer state converted at " + *at + ", before its boundary " +
                       std::to_string(spec_.delay));
    }
    // Build the representation the state describes, then load into it.
    std::unique_ptr<LayerCache> fresh = converted ? probe_->reuse()->Clone() : plain_empty();
    if (*inner_sig != fresh->signature())
      return Corrupt("[kv] delayed layer state holds '" + *inner_sig + "', expected '" + fresh->signature() + "'");
    CacheState inner_state = state;
    inner_state.meta["signature"] = *inner_sig;
    G4_RETURN_IF_ERROR(fresh->persistence()->LoadState(inner_state));
    if (converted && fresh->reuse()->minimum_reusable_offset() != converted_at)
      return Corrupt("[kv] delayed layer state: minimum reusable offset disagrees with converted_at");
    if (!converted && fresh->reuse()->minimum_reusable_offset() != 0)
      return Corrupt("[kv] delayed layer state: unconverted cache with a minimum reusable offset");
    inner_ = std::move(fresh);
    converted_at_ = converted_at;
    return Status::Ok();
  }

  void set_plain_factory(std::unique_ptr<LayerCache> empty_plain) { plain_probe_ = std::move(empty_plain); }

 private:
  bool Due() const { return converted_at_ < 0 && offset() > 0 && offset() >= spec_.delay; }
  std::unique_ptr<LayerCache> plain_empty() const { return plain_probe_->reuse()->Clone(); }
  size_t PlainProjected(int64_t tokens) const { return plain_probe_->ProjectedBytes(tokens); }

  std::unique_ptr<LayerCache> inner_;
  std::unique_ptr<LayerCache> probe_;        // empty cache of the target codec (projection, restore)
  std::unique_ptr<LayerCache> plain_probe_;  // empty plain cache
  LayerKvSpec spec_;
  std::string layout_;
  int64_t converted_at_ = -1;
};

}  // namespace

std::string LayerKvSpec::signature() const {
  return codec.signature() + (delay >= 0 ? "@" + std::to_string(delay) : "");
}

StatusOr<std::unique_ptr<LayerCache>> MakeLayerCache(const LayerKvSpec& spec, int num_kv_heads, int head_dim,
                                                     int window) {
  if (spec.delay < 0 || spec.codec.kind == KvCodecSpec::Kind::kPlain)
    return MakeCodecCache(spec.codec, num_kv_heads, head_dim, window);
  G4_ASSIGN_OR_RETURN(std::unique_ptr<LayerCache> probe, MakeCodecCache(spec.codec, num_kv_heads, head_dim, window));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<LayerCache> plain,
                      MakeCodecCache(KvCodecSpec::Plain(), num_kv_heads, head_dim, window));
  G4_ASSIGN_OR_RETURN(std::unique_ptr<LayerCache> plain_probe,
                      MakeCodecCache(KvCodecSpec::Plain(), num_kv_heads, head_dim, window));
  // The probe's spec may differ from the request (affine group narrowed to head_dim).
  LayerKvSpec effective = spec;
  effective.codec = static_cast<CodecCache*>(probe.get())->codec().spec();
  const std::string layout = window > 0 ? "kv:ring:" + std::to_string(window) : "";
  auto cache = std::make_unique<DelayedCache>(std::move(plain), std::move(probe), effective, layout);
  cache->set_plain_factory(std::move(plain_probe));
  return std::unique_ptr<LayerCache>(std::move(cache));
}

}  // namespace g4

