// Tokenizer: Gemma's byte-fallback BPE loaded from a Hugging Face
// tokenizers-format tokenizer.json, reproducing what the Rust `tokenizers`
// library computes for encode(add_special_tokens=False) and
// decode(skip_special_tokens=False).
//
// Pipeline of Encode: strict UTF-8 check -> added tokens matched on the raw
// text (leftmost-longest, like HF's added-token trie) -> for the text between
// them: normalizer -> pre-tokenizer -> BPE with byte fallback. Only the step
// types Gemma's file uses are implemented; a file naming any other type
// fails to load with an Unsupported error that names the type.
//
// Encode never adds <bos>/<eos>: chat rendering writes <bos> itself, and a
// raw-completion caller prepends bos_id() when add_bos_token() says so.
// A loaded Tokenizer is immutable apart from an internal word cache, so
// Encode/Decode may be called from several threads at once.
// Spec: shared docs gemma4-architecture.md section 6.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace g4 {

class BpeModel;
class TextPipeline;
class AddedTokenMatcher;

class Tokenizer {
 public:
  // `path` is a tokenizer.json file, or a model directory holding
  // tokenizer.json and optionally tokenizer_config.json (read for
  // add_bos_token / bos_token / eos_token / pad_token).
  static StatusOr<Tokenizer> Load(const std::string& path);
  // Builds from the text of a tokenizer.json; `name` labels error messages.
  static StatusOr<Tokenizer> FromJson(std::string_view json_text, const std::string& name = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`, no special tokens added. InvalidArgument (with the
  // byte offset) when `text` is not valid UTF-8.
  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;

  // Text of `ids`, special tokens kept. Runs of byte-fallback tokens that are
  // not valid UTF-8 become one U+FFFD per byte (as HF does); ids outside
  // [0, vocab_size()) are skipped (as HF does).
  std::string Decode(std::span<const int32_t> ids) const;

  // Number of ids (262144 for Gemma 4): one past the largest id.
  int32_t vocab_size() const;
  // The vocabulary string of `id` ("▁the", "<0x0A>", "<|turn>"); nullopt for
  // an id outside the vocabulary.
  std::optional<std::string_view> IdToPiece(int32_t id) const;
  // The id of a vocabulary string or added token, nullopt when absent.
  std::optional<int32_t> PieceToId(std::string_view piece) const;
  // The id of an added token ("<|turn>" -> 105, "\n" -> 107); nullopt when
  // `content` is not an added token.
  std::optional<int32_t> AddedTokenId(std::string_view content) const;
  // True for added tokens flagged "special" in tokenizer.json (<bos>, <|turn>, ...).
  bool IsSpecial(int32_t id) const;

  // From tokenizer_config.json when present; otherwise add_bos_token() is
  // false and the ids are those of "<bos>", "<eos>", "<pad>" (or -1).
  bool add_bos_token() const { return add_bos_token_; }
  bool add_eos_token() const { return add_eos_token_; }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }

  // For StreamDecoder: how the decoder treats one token. `text` is the
  // token's string after the decoder's per-token replacements; when the
  // decoder has ByteFallback and the token is <0xNN>, `byte` is NN, else -1.
  struct DecodedToken {
    std::string text;
    int byte = -1;
  };
  std::optional<DecodedToken> DecodeToken(int32_t id) const;
  // True when tokenizer.json has no decoder: HF then joins tokens with " ".
  bool joins_with_space() const;

 private:
  Tokenizer();
  Status ReadConfig(const std::string& path);
  void EncodeSegment(std::string_view text, std::vector<int32_t>* ids) const;
  std::string DecodePiece(std::string_view piece) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<TextPipeline> pipeline_;
  std::unique_ptr<AddedTokenMatcher> added_;
  std::vector<std::string> extra_pieces_;  // added tokens past the model vocab, from id model size on
  std::vector<uint8_t> special_;           // per id: 1 for special added tokens
  bool add_bos_token_ = false;
  bool add_eos_token_ = false;
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
};

}  // namespace g4
