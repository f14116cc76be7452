// The string-level stages around the BPE model, parsed from tokenizer.json:
// the normalizer, the pre-tokenizer and the decoder. Only the step types
// Gemma's file uses exist here (Replace / Sequence normalizers; Split /
// Sequence pre-tokenizers; Replace / ByteFallback / Fuse / Sequence
// decoders, all with literal String patterns); anything else is refused at
// load with Unsupported naming the type. Semantics follow HF tokenizers.
// Replace chains that could grow text more than kMaxNormalizeGrowth-fold
// (normalizer, or decoder per token) are refused at load with OutOfRange, so
// Normalize(s) is at most kMaxNormalizeGrowth * |s| bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace g4 {

struct ReplaceRule {
  std::string pattern;  // literal, non-empty
  std::string content;
};

// Replaces every non-overlapping occurrence of each rule's pattern in turn.
std::string ApplyReplaceRules(const std::vector<ReplaceRule>& rules, std::string_view s);

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitRule {
  std::string pattern;  // literal; empty never matches (as in HF)
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

class TextPipeline {
 public:
  // `doc` is the tokenizer.json document; `name` prefixes messages.
  static StatusOr<TextPipeline> FromJson(const nlohmann::json& doc, const std::string& name);

  std::string Normalize(std::string_view s) const { return ApplyReplaceRules(normalizer_, s); }
  // Appends the pre-tokens of `s` (views into `s`, none empty) to `out`.
  void PreTokenize(std::string_view s, std::vector<std::string_view>* out) const;

  // Decoder shape, normalised to: per-token replacements, then optionally
  // byte fallback, then concatenation. `has_decoder` false means HF's
  // default of joining tokens with " ".
  bool has_decoder() const { return has_decoder_; }
  bool byte_fallback() const { return byte_fallback_; }
  const std::vector<ReplaceRule>& decode_rules() const { return decode_rules_; }

 private:
  std::vector<ReplaceRule> normalizer_;
  std::vector<SplitRule> splits_;
  bool has_decoder_ = false;
  bool byte_fallback_ = false;
  std::vector<ReplaceRule> decode_rules_;
};

// NN for a token spelled exactly "<0xNN>" (hex digits, either case), else -1.
int ByteFallbackValue(std::string_view token);

}  // namespace g4
