#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "tokenizer/utf8.h"

namespace g4 {
namespace {

using json = nlohmann::json;

constexpr std::string_view kMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's word marker
constexpr size_t kMaxCachedBytes = 128;
constexpr size_t kMaxCacheEntries = 1 << 17;

uint64_t PairKey(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

Status ReadBool(const json& model, const char* key, const std::string& prefix, bool* out) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return Corrupt(prefix + ": model." + key + " is not a boolean");
  *out = it->get<bool>();
  return Status::Ok();
}

}  // namespace

struct BpeModel::WordCache {
  // Transparent, so a lookup by string_view makes no string. A member (not
  // in the anonymous namespace): WordCache has external linkage.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

BpeModel::BpeModel() : cache_(std::make_unique<WordCache>()) {
  ascii_ids_.fill(-1);
  byte_ids_.fill(-1);
}
BpeModel::~BpeModel() = default;

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Build(TokenizerJson* parsed, const std::string& name) {
  const std::string prefix = "[tokenizer] " + name;
  const json& doc = parsed->doc;
  if (!doc.is_object()) return Corrupt(prefix + ": top level is not a JSON object");
  auto mit = doc.find("model");
  if (mit == doc.end() || !mit->is_object()) return Corrupt(prefix + ": no \"model\" object");
  const json& model = *mit;
  auto type = model.find("type");
  if (type == model.end() || !type->is_string()) return Corrupt(prefix + ": model has no \"type\"");
  if (*type != "BPE") return Unsupported(prefix + ": model type '" + type->get<std::string>() + "' is not supported (only BPE)");

  if (auto d = model.find("dropout"); d != model.end() && !d->is_null()) {
    if (!d->is_number()) return Corrupt(prefix + ": model.dropout is not a number");
    if (d->get<double>() > 0.0) return Unsupported(prefix + ": BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it == model.end() || it->is_null()) continue;
    if (!it->is_string()) return Corrupt(prefix + ": model." + key + " is not a string");
    if (!it->get<std::string>().empty()) return Unsupported(prefix + ": BPE " + key + " is not supported");
  }
  if (!parsed->has_vocab) return Corrupt(prefix + ": model.vocab is missing or not an object");
  // An array is streamed into parsed->merges; anything else stays in the
  // DOM. Ignoring it would silently tokenize without merges.
  if (auto mg = model.find("merges"); mg != model.end() && !mg->is_null())
    return Corrupt(prefix + ": model.merges is " + (mg->is_object() ? "an object" : std::string("a ") + mg->type_name()) +
                   ", not a list of merges");

  std::unique_ptr<BpeModel> m(new BpeModel());
  G4_RETURN_IF_ERROR(ReadBool(model, "fuse_unk", prefix, &m->fuse_unk_));
  G4_RETURN_IF_ERROR(ReadBool(model, "byte_fallback", prefix, &m->byte_fallback_));
  G4_RETURN_IF_ERROR(ReadBool(model, "ignore_merges", prefix, &m->ignore_merges_));
  G4_RETURN_IF_ERROR(m->SetVocab(&parsed->vocab, prefix));
  G4_RETURN_IF_ERROR(m->SetMerges(parsed->merges, prefix));

  if (auto u = model.find("unk_token"); u != model.end() && !u->is_null()) {
    if (!u->is_string()) return Corrupt(prefix + ": model.unk_token is not a string");
    m->unk_id_ = m->Find(u->get<std::string>());
    if (m->unk_id_ < 0) return Corrupt(prefix + ": unk_token '" + u->get<std::string>() + "' is not in the vocab");
  }
  for (int c = 0; c < 128; ++c) m->ascii_ids_[c] = m->Find(std::string(1, static_cast<char>(c)));
  for (int b = 0; b < 256; ++b) {
    char name_buf[8];
    std::snprintf(name_buf, sizeof(name_buf), "<0x%02X>", b);
    m->byte_ids_[b] = m->Find(name_buf);
  }
  m->SetUpChunking();
  return m;
}

Status BpeModel::SetVocab(std::vector<std::pair<std::string, int64_t>>* vocab, const std::string& prefix) {
  int64_t max_id = -1;
  size_t bytes = 0;
  for (const auto& [piece, id] : *vocab) {
    max_id = std::max(max_id, id);
    bytes += piece.size();
  }
  // Ids index dense tables; a vocabulary mostly made of holes is a broken file,
  // not something to allocate gigabytes for.
  if (max_id >= static_cast<int64_t>(vocab->size()) * 2 + 1024)
    return Corrupt(prefix + ": vocab ids are sparse (largest " + std::to_string(max_id) + " for " +
                   std::to_string(vocab->size()) + " entries)");
  if (bytes >= UINT32_MAX) return Corrupt(prefix + ": vocab pieces exceed 4 GB");
  const size_t n = static_cast<size_t>(max_id + 1);
  std::vector<int32_t> entry_of(n, -1);
  for (size_t i = 0; i < vocab->size(); ++i) {
    const int64_t id = (*vocab)[i].second;
    if (entry_of[id] >= 0)
      return Corrupt(prefix + ": vocab id " + std::to_string(id) + " is given to both '" +
                     (*vocab)[entry_of[id]].first + "' and '" + (*vocab)[i].first + "'");
    entry_of[id] = static_cast<int32_t>(i);
  }
  arena_.reserve(bytes);
  offsets_.resize(n + 1);
  present_.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    offsets_[id] = static_cast<uint32_t>(arena_.size());
    if (entry_of[id] < 0) continue;
    const std::string& piece = (*vocab)[entry_of[id]].first;
    arena_.insert(arena_.end(), piece.begin(), piece.end());
    present_[id] = 1;
  }
  offsets_[n] = static_cast<uint32_t>(arena_.size());
  index_.Reserve(vocab->size());
  auto piece_fn = [this](int32_t id) { return PieceUnchecked(id); };
  for (size_t id = 0; id < n; ++id) {
    if (!present_[id]) continue;
    const int32_t holder = index_.Insert(PieceUnchecked(id), static_cast<int32_t>(id), piece_fn);
    if (holder != static_cast<int32_t>(id))
      return Corrupt(prefix + ": vocab piece '" + std::string(PieceUnchecked(id)) + "' appears twice");
  }
  std::vector<std::pair<std::string, int64_t>>().swap(*vocab);
  return Status::Ok();
}

Status BpeModel::SetMerges(const std::vector<std::pair<std::string, std::string>>& merges, const std::string& prefix) {
  if (merges.size() >= UINT32_MAX) return Corrupt(prefix + ": too many merges");
  merges_.Reserve(merges.size());
  auto piece_fn = [this](int32_t id) { return PieceUnchecked(id); };
  // Three random lookups and one random insert per merge over ~515k merges:
  // done in batches whose table slots are prefetched first, so the cache
  // misses overlap instead of queueing (about 3x faster than one by one).
  constexpr size_t kBatch = 32;
  std::string joined[kBatch];
  uint64_t hashes[kBatch][3];
  uint64_t keys[kBatch], values[kBatch];
  for (size_t begin = 0; begin < merges.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, merges.size() - begin);
    for (size_t k = 0; k < n; ++k) {
      const auto& [a, b] = merges[begin + k];
      joined[k].assign(a).append(b);
      hashes[k][0] = PieceIndex::HashOf(a);
      hashes[k][1] = PieceIndex::HashOf(b);
      hashes[k][2] = PieceIndex::HashOf(joined[k]);
      for (uint64_t h : hashes[k]) index_.Prefetch(h);
    }
    for (size_t k = 0; k < n; ++k) {
      const size_t rank = begin + k;
      const auto& [a, b] = merges[rank];
      const int32_t left = index_.Find(a, hashes[k][0], piece_fn);
      const int32_t right = index_.Find(b, hashes[k][1], piece_fn);
      const int32_t merged = index_.Find(joined[k], hashes[k][2], piece_fn);
      if (left < 0 || right < 0 || merged < 0) {
        const std::string& missing = left < 0 ? a : right < 0 ? b : joined[k];
        return Corrupt(prefix + ": merge #" + std::to_string(rank) + " ('" + a + "' + '" + b + "'): token '" +
                       missing + "' is not in the vocab");
      }
      keys[k] = PairKey(left, right);
      values[k] = static_cast<uint64_t>(rank) << 32 | static_cast<uint32_t>(merged);
      merges_.Prefetch(keys[k]);
    }
    // In file order, so a later duplicate wins, as in HF's HashMap collect.
    for (size_t k = 0; k < n; ++k) merges_.Put(keys[k], values[k]);
  }
  return Status::Ok();
}

void BpeModel::SetUpChunking() {
  if (ignore_merges_ || Find(kMarker) < 0) return;
  for (int32_t id = 0; id < size(); ++id) {
    if (!present_[id]) continue;
    const std::string_view piece = PieceUnchecked(id);
    for (size_t at = piece.find(kMarker, 1); at != std::string_view::npos; at = piece.find(kMarker, at + 1)) {
      const size_t start = utf8::PreviousCharStart(piece, at);
      const int len = utf8::SequenceLength(static_cast<uint8_t>(piece[start]));
      if (len == 0 || start + len != at) return;  // not valid UTF-8: leave chunking off rather than guess
      unsafe_before_marker_.push_back(utf8::DecodeValid(piece.data() + start, len));
    }
  }
  std::sort(unsafe_before_marker_.begin(), unsafe_before_marker_.end());
  unsafe_before_marker_.erase(std::unique(unsafe_before_marker_.begin(), unsafe_before_marker_.end()),
                              unsafe_before_marker_.end());
  chunking_ = true;
}

bool BpeModel::SafeCutBefore(std::string_view word, size_t marker_at) const {
  const size_t start = utf8::PreviousCharStart(word, marker_at);
  const int len = static_cast<int>(marker_at - start);
  // The character must be a vocabulary piece itself: byte-fallback or unk
  // symbols are spelled differently from the text, so the piece scan above
  // says nothing about them.
  const int32_t id = len == 1 ? ascii_ids_[static_cast<uint8_t>(word[start]) & 0x7F] : Find(word.substr(start, len));
  if (id < 0) return false;
  const uint32_t cp = utf8::DecodeValid(word.data() + start, len);
  return !std::binary_search(unsafe_before_marker_.begin(), unsafe_before_marker_.end(), cp);
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = Find(word);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  if (!chunking_) {
    TokenizeChunk(word, ids);
    return;
  }
  size_t chunk_start = 0;
  for (size_t at = word.find(kMarker, 1); at != std::string_view::npos; at = word.find(kMarker, at + kMarker.size())) {
    if (at == chunk_start || !SafeCutBefore(word, at)) continue;
    TokenizeChunk(word.substr(chunk_start, at - chunk_start), ids);
    chunk_start = at;
  }
  TokenizeChunk(word.substr(chunk_start), ids);
}

void BpeModel::TokenizeChunk(std::string_view chunk, std::vector<int32_t>* ids) const {
  if (chunk.size() > kMaxCachedBytes) {
    MergeWord(chunk, ids);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->map.find(chunk);
    if (it != cache_->map.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  MergeWord(chunk, ids);
  std::vector<int32_t> result(ids->begin() + first, ids->end());
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->map.size() >= kMaxCacheEntries) cache_->map.clear();
  cache_->map.emplace(std::string(chunk), std::move(result));
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbours still alive; -1 at the ends
    bool alive;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t merged;
  };
  // Min-heap on (rank, position): the best merge first, leftmost among equals.
  auto worse = [](const Candidate& x, const Candidate& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();

  auto add = [&](int32_t id) {
    const int32_t i = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, i - 1, i + 1, true});
  };
  // Mirrors HF's BPE::merge_word, including its unk quirks: a pending unk is
  // written only when a known character or the end of the word follows.
  bool pending_unk = false;
  for (size_t i = 0; i < word.size();) {
    const auto lead = static_cast<uint8_t>(word[i]);
    int len = utf8::SequenceLength(lead);
    if (len == 0 || i + len > word.size()) len = 1;  // cannot happen for validated input
    const int32_t id = lead < 0x80 ? ascii_ids_[lead] : Find(word.substr(i, len));
    if (id >= 0) {
      if (pending_unk) add(unk_id_);
      pending_unk = false;
      add(id);
    } else {
      bool all_bytes = byte_fallback_;
      for (int k = 0; k < len && all_bytes; ++k) all_bytes = byte_ids_[static_cast<uint8_t>(word[i + k])] >= 0;
      if (all_bytes) {
        for (int k = 0; k < len; ++k) add(byte_ids_[static_cast<uint8_t>(word[i + k])]);
      } else if (unk_id_ >= 0) {
        if (pending_unk && !fuse_unk_) add(unk_id_);
        pending_unk = true;
      }  // no unk token: HF drops the character
    }
    i += len;
  }
  if (pending_unk) add(unk_id_);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  auto push = [&](int32_t pos, int32_t left, int32_t right) {
    if (const uint64_t* m = merges_.Find(PairKey(left, right))) {
      heap.push_back({static_cast<uint32_t>(*m >> 32), pos, static_cast<int32_t>(*m & 0xFFFFFFFFu)});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) push(static_cast<int32_t>(i), symbols[i].id, symbols[i + 1].id);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& s = symbols[top.pos];
    if (!s.alive || s.next < 0) continue;
    Symbol& right = symbols[s.next];
    // A stale candidate: the pair at this position has changed since.
    const uint64_t* m = merges_.Find(PairKey(s.id, right.id));
    if (!m || static_cast<int32_t>(*m & 0xFFFFFFFFu) != top.merged) continue;
    s.id = top.merged;
    right.alive = false;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev, symbols[s.prev].id, s.id);
    if (s.next >= 0) push(top.pos, s.id, symbols[s.next].id);
  }
  for (const Symbol& s : symbols)
    if (s.alive) ids->push_back(s.id);
}

}  // namespace g4
