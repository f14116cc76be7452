// The BPE model of tokenizer.json ("type": "BPE"): vocabulary, merge ranks,
// byte fallback and unk handling, reproducing HF tokenizers' BPE::tokenize
// (word split into characters, unknown characters into <0xNN> byte tokens,
// then repeatedly the lowest-ranked adjacent pair merged, leftmost first).
//
// Speed: Gemma's pre-tokenizer does not split normalized text (its Split on
// " " runs after " " became "▁"), so a "word" can be a whole paragraph. The
// model cuts it before each "▁" whose preceding character c never appears as
// "c▁" inside any vocabulary piece: no merge can cross such a cut, so the
// pieces tokenize independently with identical results (checked at load from
// the vocabulary, not assumed). Pieces are cached, so repeated words cost one
// hash lookup; the merge loop itself is a heap, O(n log n) per piece.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/flat_map.h"
#include "tokenizer/tokenizer_json.h"

namespace g4 {

class BpeModel {
 public:
  // Takes parsed.vocab and parsed.merges (moved out) and the options in
  // parsed.doc["model"]. Unsupported for non-BPE models or BPE options g4
  // does not implement (dropout, subword prefix/suffix); Corrupt for
  // inconsistent vocab/merges.
  static StatusOr<std::unique_ptr<BpeModel>> Build(TokenizerJson* parsed, const std::string& name);
  ~BpeModel();

  // Appends the ids of one pre-token (valid UTF-8) to `ids`.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  // One past the largest vocabulary id.
  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  std::optional<std::string_view> Piece(int32_t id) const {
    if (id < 0 || id >= size() || !present_[id]) return std::nullopt;
    return PieceUnchecked(id);
  }
  // -1 when absent.
  int32_t Find(std::string_view piece) const {
    return index_.Find(piece, [this](int32_t id) { return PieceUnchecked(id); });
  }
  bool chunking() const { return chunking_; }

 private:
  struct WordCache;
  BpeModel();
  std::string_view PieceUnchecked(int32_t id) const {
    return std::string_view(arena_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  Status SetVocab(std::vector<std::pair<std::string, int64_t>>* vocab, const std::string& prefix);
  Status SetMerges(const std::vector<std::pair<std::string, std::string>>& merges, const std::string& prefix);
  void SetUpChunking();
  bool SafeCutBefore(std::string_view word, size_t marker_at) const;
  void TokenizeChunk(std::string_view chunk, std::vector<int32_t>* ids) const;
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;

  std::vector<char> arena_;       // all pieces back to back, in id order
  std::vector<uint32_t> offsets_;  // piece i is arena_[offsets_[i], offsets_[i+1])
  std::vector<uint8_t> present_;   // 0 for ids the vocabulary skips
  PieceIndex index_;
  FlatU64Map merges_;              // (left << 32 | right) -> (rank << 32 | merged id)
  std::array<int32_t, 128> ascii_ids_;
  std::array<int32_t, 256> byte_ids_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool chunking_ = false;
  std::vector<uint32_t> unsafe_before_marker_;  // sorted code points
  std::unique_ptr<WordCache> cache_;
};

}  // namespace g4
