// KvPool operations on a sequence's records as a whole: the delayed
// precision change (Maintain) and Export / Import (kv_file.h frames them).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kv/kv_pool.h"
#include "kv/kv_pool_impl.h"

namespace g4 {

// --- delayed precision

Status KvPool::Maintain(KvSeq& seq) {
  G4_CHECK(seq.pool_ == this);
  Impl& im = *impl_;
  Impl::Seq& s = im.seq(seq.id_);
  const int64_t bs = im.block_size();
  // The rule of the per-layer delayed caches it replaces: convert once the
  // sequence holds `delay` tokens (never an empty one), before its next step.
  bool due[kNumKvGroups] = {false, false};
  bool any = false;
  for (int g = 0; g < kNumKvGroups; ++g) {
    const KvGroupLayout& gl = im.group(g);
    due[g] = gl.delayed() && s.group[g].converted_at < 0 && s.length >= gl.spec.delay;
    if (!due[g]) continue;
    any = true;
    const BlockAllocator& to = im.store[g][1].blocks;
    if (!to.CanAllocate(seq.id_, s.group[g].held))
      return ResourceExhausted("[kv] KV pool full: converting " + std::to_string(s.length) + " tokens needs " +
                               std::to_string(s.group[g].held) + " blocks of store 1 of the " +
                               (g == 0 ? "full" : "sliding") + " group, " + std::to_string(to.free_blocks()) +
                               " free (" + std::to_string(to.reserved()) + " reserved)");
  }
  if (!any) return Status::Ok();
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!due[g]) continue;
    Impl::SeqGroup& sg = s.group[g];
    Impl::Store& from = im.store[g][0];
    Impl::Store& to = im.store[g][1];
    std::vector<int32_t> from_blocks, to_blocks, tokens;
    for (int64_t i = sg.released; i < static_cast<int64_t>(sg.table.size()); ++i) {
      const int32_t b = sg.table[i];
      G4_CHECK(b > 0);
      const int32_t nb = to.blocks.Allocate(seq.id_);
      const int64_t valid = std::clamp<int64_t>(s.length - i * bs, 0, bs);
      if (valid > 0) {
        from_blocks.push_back(b);
        to_blocks.push_back(nb);
        tokens.push_back(static_cast<int32_t>(valid));
      }
      from.blocks.Release(seq.id_, b);
      sg.table[i] = nb;
    }
    for (size_t l = 0; l < from.views.size(); ++l)
      backend_->ops().KvRecodeBlocks(from.views[l], to.views[l], static_cast<int>(bs), from_blocks, to_blocks, tokens);
    sg.store = 1;
    sg.converted_at = s.length;
    from.blocks.SetReservation(seq.id_, 0);  // the plain phase is over
  }
  return Status::Ok();
}

// --- export / import

namespace {

struct OwnedLayer {
  int layer, group, index;
};

}  // namespace

std::vector<KvPool::LayerRecords> KvPool::Export(const KvSeq& seq) const {
  G4_CHECK(seq.pool_ == this);
  const Impl& im = *impl_;
  const Impl::Seq& s = im.seq(seq.id_);
  const int64_t bs = im.block_size();
  std::vector<LayerRecords> out;
  for (int l = 0; l < static_cast<int>(config_.layers.size()); ++l) {
    if (config_.layers[l].kv_shared) continue;
    const int g = im.layout.layer_group[l], i = im.layout.layer_index[l];
    const Impl::SeqGroup& sg = s.group[g];
    const KvRecordFormat& f = im.store[g][sg.store].views[i].format;
    LayerRecords rec;
    rec.layer = l;
    rec.signature = f.signature();
    rec.first_token = im.first_needed(g, s.length);
    rec.records.resize(static_cast<size_t>((s.length - rec.first_token) * f.record_bytes));
    for (int64_t lo = rec.first_token; lo < s.length;) {
      const int64_t bi = lo / bs, hi = std::min(s.length, (bi + 1) * bs);
      backend_->CopyToHost(rec.records.data() + (lo - rec.first_token) * f.record_bytes,
                           im.block_data(g, sg.store, i, sg.table[bi]) + (lo - bi * bs) * f.record_bytes,
                           static_cast<size_t>((hi - lo) * f.record_bytes));
      lo = hi;
    }
    out.push_back(std::move(rec));
  }
  backend_->Sync();
  return out;
}

StatusOr<KvSeq> KvPool::Import(const std::vector<LayerRecords>& layers, int64_t length,
                               const std::array<int64_t, kNumKvGroups>& converted_at) {
  Impl& im = *impl_;
  const int64_t bs = im.block_size();
  if (length < 0 || length > std::numeric_limits<int32_t>::max())
    return InvalidArgument("[kv] cannot import a sequence of " + std::to_string(length) + " tokens");
  // Validate everything before touching the pool.
  int store[kNumKvGroups] = {0, 0};
  for (int g = 0; g < kNumKvGroups; ++g) {
    const KvGroupLayout& gl = im.group(g);
    const int64_t at = converted_at[g];
    const std::string where = std::string("[kv] ") + (g == 0 ? "full" : "sliding") + " layers: ";
    if (at == -1) continue;
    if (!gl.delayed()) return InvalidArgument(where + "converted at " + std::to_string(at) + ", but not delayed here");
    if (at < std::max<int64_t>(gl.spec.delay, 1) || at > length)
      return InvalidArgument(where + "converted at " + std::to_string(at) + ", outside [max(" +
                             std::to_string(gl.spec.delay) + ", 1), " + std::to_string(length) + "]");
    store[g] = 1;
  }
  std::vector<OwnedLayer> owned;
  for (int l = 0; l < static_cast<int>(config_.layers.size()); ++l)
    if (!config_.layers[l].kv_shared) owned.push_back({l, im.layout.layer_group[l], im.layout.layer_index[l]});
  if (layers.size() != owned.size())
    return InvalidArgument("[kv] records for " + std::to_string(layers.size()) + " layers, this model has " +
                           std::to_string(owned.size()) + " layers that own K/V");
  for (size_t k = 0; k < owned.size(); ++k) {
    const OwnedLayer& o = owned[k];
    const LayerRecords& rec = layers[k];
    const std::string where = "[kv] layer " + std::to_string(o.layer) + ": ";
    if (rec.layer != o.layer)
      return InvalidArgument("[kv] records #" + std::to_string(k) + " are for layer " + std::to_string(rec.layer) +
                             ", expected layer " + std::to_string(o.layer));
    const KvRecordFormat& f = im.store[o.group][store[o.group]].views[o.index].format;
    if (rec.signature != f.signature())
      return InvalidArgument(where + "records are " + rec.signature + ", this pool stores " + f.signature() +
                             " there");
    const int64_t needed = im.first_needed(o.group, length);
    if (rec.first_token < 0 || rec.first_token > needed)
      return InvalidArgument(where + "records start at token " + std::to_string(rec.first_token) +
                             ", the sequence needs them from token " + std::to_string(needed));
    const uint64_t want = static_cast<uint64_t>(length - rec.first_token) * static_cast<uint64_t>(f.record_bytes);
    if (rec.records.size() != want)
      return InvalidArgument(where + std::to_string(rec.records.size()) + " bytes of records, expected " +
                             std::to_string(want) + " (" + std::to_string(length - rec.first_token) + " tokens of " +
                             std::to_string(f.record_bytes) + " bytes)");
  }
  const int64_t entries = im.layout.BlocksFor(length);
  int64_t keep_from[kNumKvGroups] = {0, 0};
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!im.group(g).used()) continue;
    keep_from[g] = length > 0 ? im.first_needed(g, length) / bs : 0;
    const BlockAllocator& a = im.store[g][store[g]].blocks;
    if (entries - keep_from[g] > a.unreserved_free())
      return ResourceExhausted("[kv] KV pool full: importing " + std::to_string(length) + " tokens needs " +
                               std::to_string(entries - keep_from[g]) + " blocks of the " +
                               (g == 0 ? "full" : "sliding") + " store " + std::to_string(store[g]) + ", " +
                               std::to_string(a.unreserved_free()) + " unreserved free");
  }

  const int32_t id = im.NewId();
  Impl::Seq& s = im.seqs[id];
  s.length = length;
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!im.group(g).used()) continue;
    Impl::SeqGroup& sg = s.group[g];
    sg.store = static_cast<uint8_t>(store[g]);
    sg.converted_at = converted_at[g];
    sg.released = keep_from[g];
    sg.table.assign(entries, -1);
    for (int64_t i = keep_from[g]; i < entries; ++i) {
      sg.table[i] = im.store[g][store[g]].blocks.Allocate(id);
      ++sg.held;
    }
  }
  std::vector<uint8_t> zeros;
  for (size_t k = 0; k < owned.size(); ++k) {
    const OwnedLayer& o = owned[k];
    const LayerRecords& rec = layers[k];
    const Impl::SeqGroup& sg = s.group[o.group];
    const int64_t rb = im.record_bytes(o.group, sg.store, o.index);
    const int64_t from = im.first_needed(o.group, length);
    // Slots of the first block before the window (tokens nothing will read)
    // get zeros, so the blocks' bytes depend on the file alone.
    if (length > 0 && from % bs != 0) {
      zeros.resize(std::max<size_t>(zeros.size(), static_cast<size_t>((from % bs) * rb)), 0);
      backend_->CopyToDevice(im.block_data(o.group, sg.store, o.index, sg.table[from / bs]), zeros.data(),
                             static_cast<size_t>((from % bs) * rb));
    }
    for (int64_t lo = from; lo < length;) {
      const int64_t bi = lo / bs, hi = std::min(length, (bi + 1) * bs);
      backend_->CopyToDevice(im.block_data(o.group, sg.store, o.index, sg.table[bi]) + (lo - bi * bs) * rb,
                             rec.records.data() + (lo - rec.first_token) * rb, static_cast<size_t>((hi - lo) * rb));
      lo = hi;
    }
  }
  backend_->Sync();
  return KvSeq(this, id);
}

}  // namespace g4
