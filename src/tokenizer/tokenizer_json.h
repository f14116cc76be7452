// Parsing of tokenizer.json. The file is ~16 MB, almost all of it the BPE
// vocabulary (262144 entries) and merge list (~515k pairs); building those
// as nlohmann::json DOM nodes costs ~0.4 s. A SAX pass streams model.vocab and
// model.merges straight into flat vectors and keeps a DOM only for the small
// rest (normalizer, pre_tokenizer, decoder, added_tokens, model options).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace g4 {

struct TokenizerJson {
  // The document without model.vocab and model.merges.
  nlohmann::json doc;
  bool has_vocab = false;   // model.vocab was an object
  bool has_merges = false;  // model.merges was an array
  std::vector<std::pair<std::string, int64_t>> vocab;
  // Merges in file order; both the "a b" string form and the [a, b] pair
  // form end up here.
  std::vector<std::pair<std::string, std::string>> merges;
};

// Corrupt for malformed JSON (with the byte offset) or a malformed
// vocab/merges entry. `name` prefixes messages.
StatusOr<TokenizerJson> ParseTokenizerJson(std::string_view text, const std::string& name);

}  // namespace g4
