// Small hand-written tokenizer.json documents for rule-level tests: each
// expectation is worked out by hand from HF's BPE definition.
#pragma once

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace g4::testing {

// A minimal valid BPE document: vocab {<unk>:0, a:1, b:2, c:3, ab:4, bc:5,
// abc:6, "▁":7, "<0x41>":8}, merges a+b then b+c, unk <unk>, no byte
// fallback, no normalizer / pre-tokenizer / decoder.
inline nlohmann::json SyntheticDoc() {
  return nlohmann::json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
              "continuing_subword_prefix": null, "end_of_word_suffix": null,
              "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "bc": 5, "abc": 6, "\u2581": 7, "<0x41>": 8},
              "merges": [["a", "b"], ["b", "c"]]}
  })");
}

inline StatusOr<Tokenizer> Build(const nlohmann::json& doc) { return Tokenizer::FromJson(doc.dump(), "synthetic.json"); }

}  // namespace g4::testing
