// CodecCache: one codec over one KvStore layout. Offers every cache-level
// capability except precision maintenance (it never changes precision).
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kv/caches.h"
#include "kv/codec_cache.h"

namespace g4 {
namespace {

class CapturedView final : public CapturedKvView {
 public:
  CapturedView(std::shared_ptr<const KvCodec> codec, std::vector<uint8_t> records, std::vector<int32_t> pos,
               int64_t first)
      : codec_(std::move(codec)), records_(std::move(records)), pos_(std::move(pos)) {
    attention_.Reset(codec_.get(), EncodedKv{records_.data(), codec_->record_bytes(), pos_.data(),
                                             static_cast<int64_t>(pos_.size()), first});
    view_ = attention_.MakeView();
  }
  const KvView& view() const override { return view_; }

 private:
  std::shared_ptr<const KvCodec> codec_;
  std::vector<uint8_t> records_;
  std::vector<int32_t> pos_;
  CodecKvView attention_;
  KvView view_;
};

}  // namespace

CodecCache::CodecCache(std::shared_ptr<const KvCodec> codec, int window)
    : codec_(std::move(codec)), store_(codec_->record_bytes(), window) {}

CodecCache::CodecCache(std::shared_ptr<const KvCodec> codec, KvStore store)
    : codec_(std::move(codec)), store_(std::move(store)) {
  G4_CHECK(store_.record_bytes() == codec_->record_bytes());
}

KvView CodecCache::AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) {
  encoded_.resize(n * codec_->record_bytes());
  codec_->Encode(k, v, n, encoded_.data());
  view_.Reset(codec_.get(), store_.Append(encoded_.data(), pos, n));
  return view_.MakeView();
}

std::string CodecCache::signature() const {
  const std::string layout = store_.layout_signature();
  return layout.empty() ? codec_->signature() : layout + "+" + codec_->signature();
}

DonorRows CodecCache::CaptureDonorRows() const {
  DonorRows rows;
  rows.width = codec_->width();
  const int64_t h = store_.held();
  rows.k.resize(h * rows.width);
  rows.v.resize(h * rows.width);
  rows.pos.resize(h);
  const EncodedKv held = store_.Held();
  for (int64_t i = 0; i < h; ++i) {
    const int64_t s = store_.ChronologicalSlot(i);
    codec_->Decode(held.records + s * held.record_bytes, 1, rows.k.data() + i * rows.width,
                   rows.v.data() + i * rows.width);
    rows.pos[i] = held.pos[s];
  }
  return rows;
}

std::unique_ptr<CapturedKvView> CodecCache::CaptureDonorAttention() const {
  const EncodedKv held = store_.Held();
  std::vector<uint8_t> records(held.records, held.records + held.num_keys * held.record_bytes);
  std::vector<int32_t> pos(held.pos, held.pos + held.num_keys);
  return std::make_unique<CapturedView>(codec_, std::move(records), std::move(pos), held.first);
}

StatusOr<std::unique_ptr<LayerCache>> CodecCache::ConvertTo(const KvCodecSpec& spec) const {
  G4_ASSIGN_OR_RETURN(std::shared_ptr<const KvCodec> to, KvCodec::Make(spec, codec_->num_kv_heads(), codec_->head_dim()));
  const KvCodec& from = *codec_;
  std::vector<float> k(from.width()), v(from.width());
  KvStore recoded = store_.Recode(to->record_bytes(), [&](const uint8_t* in, uint8_t* out) {
    from.Decode(in, 1, k.data(), v.data());
    to->Encode(k.data(), v.data(), 1, out);
  });
  auto out = std::make_unique<CodecCache>(std::move(to), std::move(recoded));
  out->min_reusable_ = min_reusable_;
  return std::unique_ptr<LayerCache>(std::move(out));
}

Status CodecCache::Trim(int64_t n) {
  if (n < min_reusable_)
    return InvalidArgument("[kv] cannot trim to " + std::to_string(n) + " tokens: below the minimum reusable offset " +
                           std::to_string(min_reusable_));
  return store_.Trim(n);
}

std::unique_ptr<LayerCache> CodecCache::Clone() const {
  auto c = std::make_unique<CodecCache>(codec_, store_.Clone());
  c->min_reusable_ = min_reusable_;
  return c;
}

CacheState CodecCache::SaveState() const {
  CacheState st;
  st.meta["signature"] = signature();
  st.meta["offset"] = std::to_string(store_.offset());
  st.meta["record_bytes"] = std::to_string(codec_->record_bytes());
  st.meta["minimum_reusable_offset"] = std::to_string(min_reusable_);
  st.tensors.emplace_back("records", store_.HeldRecords());
  st.tensors.emplace_back("positions", store_.HeldPositions());
  return st;
}

namespace {
StatusOr<int64_t> MetaInt(const CacheState& st, const std::string& key) {
  auto it = st.meta.find(key);
  if (it == st.meta.end()) return Corrupt("[kv] layer state lacks '" + key + "'");
  const std::string& s = it->second;
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    return Corrupt("[kv] layer state '" + key + "' is not a count: '" + s + "'");
  return std::stoll(s);
}
const std::vector<uint8_t>* Tensor(const CacheState& st, const std::string& name) {
  for (const auto& [n, t] : st.tensors)
    if (n == name) return &t;
  return nullptr;
}
}  // namespace

Status CodecCache::LoadState(const CacheState& st) {
  auto sig = st.meta.find("signature");
  if (sig == st.meta.end() || sig->second != signature())
    return InvalidArgument("[kv] layer state is for '" + (sig == st.meta.end() ? std::string("?") : sig->second) +
                           "', this cache is '" + signature() + "'");
  G4_ASSIGN_OR_RETURN(int64_t offset, MetaInt(st, "offset"));
  G4_ASSIGN_OR_RETURN(int64_t record_bytes, MetaInt(st, "record_bytes"));
  G4_ASSIGN_OR_RETURN(int64_t min_reusable, MetaInt(st, "minimum_reusable_offset"));
  if (record_bytes != codec_->record_bytes())
    return Corrupt("[kv] layer state has " + std::to_string(record_bytes) + "-byte records, codec " +
                   codec_->signature() + " writes " + std::to_string(codec_->record_bytes()));
  if (min_reusable > offset) return Corrupt("[kv] minimum reusable offset past the cache offset");
  const std::vector<uint8_t>* records = Tensor(st, "records");
  const std::vector<uint8_t>* positions = Tensor(st, "positions");
  if (!records || !positions) return Corrupt("[kv] layer state lacks its records or positions");
  KvStore next(codec_->record_bytes(), store_.window());
  G4_RETURN_IF_ERROR(next.Restore(offset, *records, *positions));
  store_ = std::move(next);
  min_reusable_ = min_reusable;
  return Status::Ok();
}

StatusOr<std::unique_ptr<LayerCache>> MakeCodecCache(const KvCodecSpec& spec, int num_kv_heads, int head_dim,
                                                     int window) {
  G4_ASSIGN_OR_RETURN(std::shared_ptr<const KvCodec> codec, KvCodec::Make(spec, num_kv_heads, head_dim));
  return std::unique_ptr<LayerCache>(std::make_unique<CodecCache>(std::move(codec), window));
}

std::unique_ptr<LayerCache> MakeContiguousCache(int num_kv_heads, int head_dim) {
  auto c = MakeCodecCache(KvCodecSpec::Plain(), num_kv_heads, head_dim, 0);
  G4_CHECK_MSG(c.ok(), c.status().ToString().c_str());
  return std::move(c).value();
}

std::unique_ptr<LayerCache> MakeRingCache(int num_kv_heads, int head_dim, int window) {
  G4_CHECK(window > 0);
  auto c = MakeCodecCache(KvCodecSpec::Plain(), num_kv_heads, head_dim, window);
  G4_CHECK_MSG(c.ok(), c.status().ToString().c_str());
  return std::move(c).value();
}

}  // namespace g4
