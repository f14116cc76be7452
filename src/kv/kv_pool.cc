// KvPool: creation, sequences (fork, trim), admission, the step protocol
// (PrepareAppend / tables / Commit) and accounting. Delayed precision and
// Export / Import are in kv_pool_records.cc, ForBudget in kv_pool_budget.cc.
#include "kv/kv_pool.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "kv/kv_pool_impl.h"

namespace g4 {
namespace {

const char* GroupName(int g) { return g == 0 ? "full" : "sliding"; }

}  // namespace

// --- KvSeq

KvSeq::KvSeq(KvSeq&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), id_(std::exchange(o.id_, -1)) {}

KvSeq& KvSeq::operator=(KvSeq&& o) noexcept {
  if (this != &o) {
    if (pool_) pool_->Release(id_);
    pool_ = std::exchange(o.pool_, nullptr);
    id_ = std::exchange(o.id_, -1);
  }
  return *this;
}

KvSeq::~KvSeq() {
  if (pool_) pool_->Release(id_);
}

int64_t KvSeq::length() const { return pool_ ? pool_->length(*this) : 0; }

// --- Impl helpers

int32_t KvPool::Impl::NewId() {
  int32_t id;
  if (!free_ids.empty()) {
    id = free_ids.back();
    free_ids.pop_back();
  } else {
    G4_CHECK(seqs.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()));
    id = static_cast<int32_t>(seqs.size());
    seqs.emplace_back();
  }
  seqs[id] = Seq{};
  seqs[id].live = true;
  return id;
}

void KvPool::Impl::ReleaseEntry(int32_t id, int g, int64_t i) {
  SeqGroup& sg = seqs[id].group[g];
  int32_t& b = sg.table[i];
  if (b < 0) return;
  store[g][sg.store].blocks.Release(id, b);
  b = -1;
  --sg.held;
}

void KvPool::Impl::TruncateTable(int32_t id, int g, int64_t entries) {
  SeqGroup& sg = seqs[id].group[g];
  while (static_cast<int64_t>(sg.table.size()) > entries) {
    ReleaseEntry(id, g, static_cast<int64_t>(sg.table.size()) - 1);
    sg.table.pop_back();
  }
  sg.released = std::min<int64_t>(sg.released, entries);
}

void KvPool::Impl::ReleaseBehindWindow(int32_t id, int g) {
  if (group(g).window <= 0) return;
  Seq& s = seqs[id];
  SeqGroup& sg = s.group[g];
  // Entry i's last token is (i + 1) B - 1: it is needed while that is at
  // least the next query's first key.
  const int64_t keep_from = std::min<int64_t>(first_needed(g, s.length) / block_size(), sg.table.size());
  for (; sg.released < keep_from; ++sg.released) ReleaseEntry(id, g, sg.released);
}

// --- creation

StatusOr<std::unique_ptr<KvPool>> KvPool::Create(const Gemma4Config& config, const KvScheme& scheme,
                                                 Backend& backend, const KvPoolOptions& options) {
  G4_ASSIGN_OR_RETURN(KvPoolLayout layout, KvPoolLayout::Make(config, scheme, options.block_size));
  auto pool = std::unique_ptr<KvPool>(new KvPool());
  pool->config_ = config;
  pool->scheme_ = scheme;
  pool->options_ = options;
  pool->backend_ = &backend;
  pool->impl_ = std::make_unique<Impl>();
  Impl& im = *pool->impl_;
  im.layout = std::move(layout);
  const int64_t bs = im.block_size();

  auto constant = [&](int kind, int key, const float* host, size_t n) -> StatusOr<const float*> {
    auto it = im.constants.find({kind, key});
    if (it == im.constants.end()) {
      G4_ASSIGN_OR_RETURN(DeviceBuffer buf, UploadConstant(backend, host, n * sizeof(float), "kv turbo constant"));
      it = im.constants.emplace(std::make_pair(kind, key), std::move(buf)).first;
    }
    return it->second.as<const float>();
  };

  std::vector<uint8_t> zeros;
  for (int g = 0; g < kNumKvGroups; ++g) {
    const KvGroupLayout& gl = im.group(g);
    for (int s = 0; s < gl.num_stores; ++s) {
      const int64_t cap = options.capacity_blocks[g][s];
      if (cap < 0 || cap >= std::numeric_limits<int32_t>::max())
        return InvalidArgument("[kv] capacity of " + std::to_string(cap) + " blocks for the " + GroupName(g) +
                               " store " + std::to_string(s) + " is out of range");
      Impl::Store& st = im.store[g][s];
      st.blocks = BlockAllocator(cap);
      const std::vector<KvRecordFormat>& formats = gl.store[s].formats;
      for (size_t i = 0; i < formats.size(); ++i) {
        const KvRecordFormat& f = formats[i];
        const size_t block_bytes = static_cast<size_t>(bs) * static_cast<size_t>(f.record_bytes);
        if (static_cast<size_t>(cap + 1) > std::numeric_limits<size_t>::max() / block_bytes)
          return ResourceExhausted("[kv] " + std::to_string(cap) + " blocks overflow the address space");
        auto buf = backend.Allocate(static_cast<size_t>(cap + 1) * block_bytes, "kv pool");
        if (!buf.ok())
          return Status(buf.status().code(), "[kv] layer " + std::to_string(gl.layers[i]) + ", store " +
                                                 std::to_string(s) + ": " + buf.status().message());
        PagedKvStore view;
        view.format = f;
        view.records = buf->as<uint8_t>();
        view.num_blocks = cap + 1;
        if (f.rotates_values()) {
          const int vb = f.spec.value_bits;
          G4_ASSIGN_OR_RETURN(view.value_centroids, constant(0, vb, TurboValueCentroids(vb), size_t{1} << vb));
          G4_ASSIGN_OR_RETURN(view.value_signs,
                              constant(1, f.head_dim, TurboValueSigns(f.head_dim), static_cast<size_t>(f.head_dim)));
        }
        // Block 0 backs padding rows: zeros decode to finite numbers in every codec.
        if (zeros.size() < block_bytes) zeros.resize(block_bytes, 0);
        backend.CopyToDevice(view.records, zeros.data(), block_bytes);
        st.buffers.push_back(std::move(buf).value());
        st.views.push_back(view);
      }
    }
  }
  backend.Sync();  // `zeros` dies here
  return pool;
}

KvPool::~KvPool() {
  if (!impl_) return;
  for (const Impl::Seq& s : impl_->seqs) G4_CHECK_MSG(!s.live, "a KvSeq outlived its KvPool");
}

// --- sequences

KvSeq KvPool::NewSequence() { return KvSeq(this, impl_->NewId()); }

void KvPool::Release(int32_t id) {
  Impl& im = *impl_;
  im.seq(id);  // checks it is live
  for (int g = 0; g < kNumKvGroups; ++g) {
    im.TruncateTable(id, g, 0);
    for (int s = 0; s < im.group(g).num_stores; ++s) im.store[g][s].blocks.CloseAccount(id);
  }
  im.seqs[id] = Impl::Seq{};
  im.free_ids.push_back(id);
}

int64_t KvPool::length(const KvSeq& seq) const {
  G4_CHECK(seq.pool_ == this);
  return impl_->seq(seq.id_).length;
}

int64_t KvPool::Impl::MinReusable(int32_t id) const {
  int64_t m = 0;
  for (const SeqGroup& sg : seq(id).group) m = std::max(m, sg.converted_at);
  return m;
}

Status KvPool::Impl::CutStatus(int32_t id, int64_t n) const {
  const Seq& s = seq(id);
  if (n < 0 || n > s.length)
    return InvalidArgument("[kv] cannot cut a sequence of " + std::to_string(s.length) + " tokens at " +
                           std::to_string(n));
  const int64_t min_reusable = MinReusable(id);
  if (n < min_reusable)
    return InvalidArgument("[kv] cannot cut at " + std::to_string(n) + " tokens: below the minimum reusable offset " +
                           std::to_string(min_reusable) + " (the sequence changed precision there)");
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!group(g).used() || group(g).window <= 0 || n == 0) continue;
    if (first_needed(g, n) / block_size() < s.group[g].released)
      return InvalidArgument("[kv] cannot cut at " + std::to_string(n) + " tokens: the sliding window there needs token " +
                             std::to_string(first_needed(g, n)) + ", whose block was released");
  }
  return Status::Ok();
}

int64_t KvPool::minimum_reusable_offset(const KvSeq& seq) const {
  G4_CHECK(seq.pool_ == this);
  return impl_->MinReusable(seq.id_);
}

bool KvPool::CanCut(const KvSeq& seq, int64_t n) const {
  G4_CHECK(seq.pool_ == this);
  return impl_->CutStatus(seq.id_, n).ok();
}

StatusOr<KvSeq> KvPool::Fork(const KvSeq& seq, int64_t tokens) {
  G4_CHECK(seq.pool_ == this);
  Impl& im = *impl_;
  G4_RETURN_IF_ERROR(im.CutStatus(seq.id_, tokens));
  const int32_t id = im.NewId();  // may move im.seqs: take references after
  const Impl::Seq& src = im.seqs[seq.id_];
  Impl::Seq& dst = im.seqs[id];
  dst.length = tokens;
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!im.group(g).used()) continue;
    const Impl::SeqGroup& from = src.group[g];
    Impl::SeqGroup& to = dst.group[g];
    const int64_t entries = im.layout.BlocksFor(tokens);
    const int64_t keep_from = tokens > 0 ? im.first_needed(g, tokens) / im.block_size() : 0;
    to.table.assign(entries, -1);
    to.released = keep_from;
    to.store = from.store;
    to.converted_at = from.converted_at;
    for (int64_t i = keep_from; i < entries; ++i) {
      const int32_t b = from.table[i];
      G4_CHECK(b > 0);
      im.store[g][from.store].blocks.AddRef(b);
      to.table[i] = b;
      ++to.held;
    }
  }
  return KvSeq(this, id);
}

Status KvPool::Trim(KvSeq& seq, int64_t n) {
  G4_CHECK(seq.pool_ == this);
  Impl& im = *impl_;
  G4_RETURN_IF_ERROR(im.CutStatus(seq.id_, n));
  for (int g = 0; g < kNumKvGroups; ++g)
    if (im.group(g).used()) im.TruncateTable(seq.id_, g, im.layout.BlocksFor(n));
  im.seq(seq.id_).length = n;
  return Status::Ok();
}

// --- admission

bool KvPool::CanAdmit(int64_t tokens, int64_t max_chunk) const {
  int64_t need[2][2];
  impl_->layout.WorstCaseBlocks(tokens, max_chunk, need);
  for (int g = 0; g < kNumKvGroups; ++g)
    for (int s = 0; s < impl_->group(g).num_stores; ++s)
      if (need[g][s] > impl_->store[g][s].blocks.unreserved_free()) return false;
  return true;
}

bool KvPool::CouldEverFit(int64_t tokens, int64_t max_chunk) const {
  int64_t need[2][2];
  impl_->layout.WorstCaseBlocks(tokens, max_chunk, need);
  for (int g = 0; g < kNumKvGroups; ++g)
    for (int s = 0; s < impl_->group(g).num_stores; ++s)
      if (need[g][s] > impl_->store[g][s].blocks.capacity()) return false;
  return true;
}

Status KvPool::Reserve(KvSeq& seq, int64_t tokens, int64_t max_chunk) {
  G4_CHECK(seq.pool_ == this);
  Impl& im = *impl_;
  im.seq(seq.id_);
  int64_t need[2][2];
  im.layout.WorstCaseBlocks(tokens, max_chunk, need);
  for (int g = 0; g < kNumKvGroups; ++g) {
    for (int s = 0; s < im.group(g).num_stores; ++s) {
      const BlockAllocator& a = im.store[g][s].blocks;
      if (!a.CanReserve(seq.id_, need[g][s]))
        return ResourceExhausted("[kv] cannot reserve " + std::to_string(need[g][s]) + " blocks of the " +
                                 GroupName(g) + " store " + std::to_string(s) + " for " + std::to_string(tokens) +
                                 " tokens: " + std::to_string(a.unreserved_free()) + " unreserved of " +
                                 std::to_string(a.free_blocks()) + " free");
    }
  }
  for (int g = 0; g < kNumKvGroups; ++g)
    for (int s = 0; s < im.group(g).num_stores; ++s) G4_CHECK(im.store[g][s].blocks.SetReservation(seq.id_, need[g][s]));
  return Status::Ok();
}

// --- a step

Status KvPool::PrepareAppend(KvSeq& seq, int64_t n) {
  G4_CHECK(seq.pool_ == this);
  Impl& im = *impl_;
  Impl::Seq& s = im.seq(seq.id_);
  if (n < 0) return InvalidArgument("[kv] cannot append " + std::to_string(n) + " tokens");
  if (n == 0) return Status::Ok();
  const int64_t bs = im.block_size();
  const int64_t begin = s.length, end = s.length + n;
  const int64_t entries = im.layout.BlocksFor(end);
  // Count first, so a refusal changes nothing.
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!im.group(g).used()) continue;
    const Impl::SeqGroup& sg = s.group[g];
    BlockAllocator& a = im.store[g][sg.store].blocks;
    int64_t need = std::max<int64_t>(0, entries - static_cast<int64_t>(sg.table.size()));
    for (int64_t i = begin / bs; i < std::min<int64_t>(entries, sg.table.size()); ++i) {
      G4_CHECK(sg.table[i] > 0);  // the block being written is never behind the window
      need += a.refcount(sg.table[i]) > 1 ? 1 : 0;
    }
    if (!a.CanAllocate(seq.id_, need))
      return ResourceExhausted("[kv] KV pool full: the " + std::string(GroupName(g)) + " store " +
                               std::to_string(sg.store) + " needs " + std::to_string(need) + " more blocks, " +
                               std::to_string(a.free_blocks()) + " free of " + std::to_string(a.capacity()) + " (" +
                               std::to_string(a.reserved()) + " reserved)");
  }
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!im.group(g).used()) continue;
    Impl::SeqGroup& sg = s.group[g];
    Impl::Store& st = im.store[g][sg.store];
    // Copy-on-write: a shared block about to be written becomes our own
    // copy of its tokens so far; the other holders keep the original.
    for (int64_t i = begin / bs; i < std::min<int64_t>(entries, sg.table.size()); ++i) {
      const int32_t old = sg.table[i];
      if (st.blocks.refcount(old) == 1) continue;
      const int32_t copy = st.blocks.Allocate(seq.id_);
      const int64_t valid = std::clamp<int64_t>(begin - i * bs, 0, bs);
      for (size_t l = 0; l < st.views.size() && valid > 0; ++l)
        backend_->CopyOnDevice(im.block_data(g, sg.store, static_cast<int>(l), copy),
                               im.block_data(g, sg.store, static_cast<int>(l), old),
                               static_cast<size_t>(valid * im.record_bytes(g, sg.store, static_cast<int>(l))));
      st.blocks.Release(seq.id_, old);
      sg.table[i] = copy;
    }
    while (static_cast<int64_t>(sg.table.size()) < entries) {
      sg.table.push_back(st.blocks.Allocate(seq.id_));
      ++sg.held;
    }
  }
  return Status::Ok();
}

int64_t KvPool::TableWidth(std::span<const KvSeq* const> seqs, KvGroup group) const {
  int64_t w = 0;
  for (const KvSeq* seq : seqs) {
    G4_CHECK(seq->pool_ == this);
    w = std::max<int64_t>(w, impl_->seq(seq->id_).group[static_cast<int>(group)].table.size());
  }
  return w;
}

void KvPool::FillTables(std::span<const KvSeq* const> seqs, KvGroup group, int32_t* table, int64_t stride,
                        uint8_t* store) const {
  const int g = static_cast<int>(group);
  for (size_t i = 0; i < seqs.size(); ++i) {
    G4_CHECK(seqs[i]->pool_ == this);
    const Impl::SeqGroup& sg = impl_->seq(seqs[i]->id_).group[g];
    const int64_t n = static_cast<int64_t>(sg.table.size());
    G4_CHECK(n <= stride);
    int32_t* row = table + static_cast<int64_t>(i) * stride;
    std::copy(sg.table.begin(), sg.table.end(), row);
    std::fill(row + n, row + stride, -1);
    if (store) store[i] = sg.store;
  }
}

PagedKv KvPool::LayerKv(int layer, const KvStepTables& tables) const {
  const Impl& im = *impl_;
  G4_CHECK(layer >= 0 && layer < static_cast<int>(im.layout.layer_group.size()));
  const int g = im.layout.layer_group[layer], i = im.layout.layer_index[layer];
  G4_CHECK(g >= 0);
  PagedKv kv;
  for (int s = 0; s < im.group(g).num_stores; ++s) kv.store[s] = im.store[g][s].views[i];
  kv.tables = tables;
  kv.block_size = im.block_size();
  return kv;
}

KvGroup KvPool::group_of_layer(int layer) const {
  const Impl& im = *impl_;
  G4_CHECK(layer >= 0 && layer < static_cast<int>(im.layout.layer_group.size()) && im.layout.layer_group[layer] >= 0);
  return static_cast<KvGroup>(im.layout.layer_group[layer]);
}

void KvPool::Commit(KvSeq& seq, int64_t n) {
  G4_CHECK(seq.pool_ == this && n >= 0);
  Impl& im = *impl_;
  Impl::Seq& s = im.seq(seq.id_);
  s.length += n;
  for (int g = 0; g < kNumKvGroups; ++g) {
    if (!im.group(g).used()) continue;
    G4_CHECK_MSG(static_cast<int64_t>(s.group[g].table.size()) >= im.layout.BlocksFor(s.length),
                 "Commit past what PrepareAppend made room for");
    im.ReleaseBehindWindow(seq.id_, g);
  }
}

// --- delayed precision (queries; Maintain is in kv_pool_records.cc)

int64_t KvPool::max_append_tokens(const KvSeq& seq) const {
  G4_CHECK(seq.pool_ == this);
  const Impl& im = *impl_;
  const Impl::Seq& s = im.seq(seq.id_);
  int64_t m = std::numeric_limits<int64_t>::max();
  // The change lands at exactly `delay` tokens whatever the chunking (a
  // first chunk is cut there too), so a sequence converts at the same token
  // alone or in any batch.
  for (int g = 0; g < kNumKvGroups; ++g)
    if (im.group(g).delayed() && s.group[g].converted_at < 0)
      m = std::min(m, std::max<int64_t>(0, im.group(g).spec.delay - s.length));
  return m;
}

int64_t KvPool::converted_at(const KvSeq& seq, KvGroup group) const {
  G4_CHECK(seq.pool_ == this);
  return impl_->seq(seq.id_).group[static_cast<int>(group)].converted_at;
}

// --- accounting

size_t KvPool::used_bytes() const {
  size_t total = 0;
  for (int g = 0; g < kNumKvGroups; ++g)
    for (int s = 0; s < impl_->group(g).num_stores; ++s)
      total += static_cast<size_t>(impl_->store[g][s].blocks.in_use()) * impl_->group(g).store[s].block_bytes;
  return total;
}

size_t KvPool::capacity_bytes() const {
  size_t total = 0;
  for (int g = 0; g < kNumKvGroups; ++g)
    for (int s = 0; s < impl_->group(g).num_stores; ++s)
      total += static_cast<size_t>(impl_->store[g][s].blocks.capacity()) * impl_->group(g).store[s].block_bytes;
  return total;
}

int64_t KvPool::blocks_in_use(KvGroup group, int store) const {
  G4_CHECK(store == 0 || store == 1);
  return impl_->store[static_cast<int>(group)][store].blocks.in_use();
}

int64_t KvPool::free_blocks(KvGroup group, int store) const {
  G4_CHECK(store == 0 || store == 1);
  return impl_->store[static_cast<int>(group)][store].blocks.free_blocks();
}

int64_t KvPool::capacity_blocks(KvGroup group, int store) const {
  G4_CHECK(store == 0 || store == 1);
  return impl_->store[static_cast<int>(group)][store].blocks.capacity();
}

size_t KvPool::block_bytes(KvGroup group, int store) const {
  G4_CHECK(store == 0 || store == 1);
  return impl_->group(static_cast<int>(group)).store[store].block_bytes;
}

int64_t KvPool::blocks_held(const KvSeq& seq, KvGroup group) const {
  G4_CHECK(seq.pool_ == this);
  return impl_->seq(seq.id_).group[static_cast<int>(group)].held;
}

size_t KvPool::bytes_per_token() const {
  size_t total = 0;
  for (const KvGroupLayout& g : impl_->layout.group)
    if (g.used()) total += g.store[g.final_store()].block_bytes / impl_->block_size();
  return total;
}

size_t KvPool::ProjectedBytes(int64_t tokens) const {
  size_t total = 0;
  for (int g = 0; g < kNumKvGroups; ++g) {
    const KvGroupLayout& gl = impl_->group(g);
    if (!gl.used()) continue;
    // A delayed group converts before the step after the one reaching its
    // boundary, so a sequence that stopped there is still plain.
    const int s = gl.delayed() && tokens > gl.spec.delay ? 1 : 0;
    total += static_cast<size_t>(impl_->layout.HeldBlocks(g, tokens)) * gl.store[s].block_bytes;
  }
  return total;
}

}  // namespace g4
