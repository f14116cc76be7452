// Every limit g4 puts on what it reads, in one place. Each one exists so a
// hostile or broken file ends in a clean Status instead of exhausting memory,
// the stack or time; each is far above what a real Gemma 4 checkpoint needs.
// docs/reliability.md lists them with the memory bound each one gives.
// Error messages name the constant, so a user who hits one can find it here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace g4 {

// ---- File sizes, checked before a byte is read.

// config.json, generation_config.json, tokenizer_config.json. Real files are
// 2 KB-1.2 MB (Gemma's tokenizer_config.json, with 6k added_tokens_decoder
// entries, is the largest).
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
// tokenizer.json. Gemma 4's is 16 MB (262,144 vocab entries, 514,906 merges).
inline constexpr uint64_t kMaxTokenizerBytes = uint64_t{64} << 20;
// The JSON header of one .safetensors file. A 100k-tensor checkpoint needs
// ~10 MB; the safetensors format itself says 100 MB.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// model.safetensors.index.json (a weight_map of a few thousand names).
inline constexpr uint64_t kMaxSafetensorsIndexBytes = uint64_t{64} << 20;
// chat_template.jinja and other small text files read whole.
inline constexpr uint64_t kMaxTemplateBytes = uint64_t{4} << 20;
// Text read whole by a command (a prompt file, perplexity --file). Large
// enough for wikitext-103's test split many times over.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{256} << 20;

// ---- Memory a command keeps for its report.

// Logit rows a command keeps whole to compare or write them (`g4 logits`,
// `g4 kv-eval`): rows x vocabulary x 4 bytes. 4 GiB is 4096 rows of Gemma 4's
// 262,144-token vocabulary; asking for more is a usage error, not a
// std::bad_alloc.
inline constexpr uint64_t kMaxKeptLogitBytes = uint64_t{4} << 30;

// ---- JSON structure, checked while parsing (never by recursion).

// Nesting depth of arrays and objects. Real files nest at most 6 deep
// (tokenizer.json's decoder Sequence); a parser stops at the first level past
// this, so a file of 99 MB of '[' costs nothing.
inline constexpr int kMaxJsonDepth = 64;
// Values (scalars, arrays, objects) in one JSON document kept as a DOM.
// Gemma 4's tokenizer.json keeps ~60k in its DOM (vocab and merges are
// streamed, see tokenizer_json.h); one DOM value costs at most ~100 bytes, so
// this bounds a DOM at ~200 MB plus its strings.
inline constexpr uint64_t kMaxJsonValues = uint64_t{1} << 21;

// ---- Tokenizer.

// Normalizer (and decoder) Replace rules may grow text: a rule replacing "a"
// with 10 bytes grows it ten-fold, eight chained rules 10^8-fold. A pipeline
// whose worst case exceeds this factor is refused at load, so normalized
// text is at most this many times the input. Gemma's grows " " to "▁" (3x).
inline constexpr size_t kMaxNormalizeGrowth = 8;

}  // namespace g4
