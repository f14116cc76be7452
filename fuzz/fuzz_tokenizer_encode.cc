// libFuzzer target: encoding arbitrary text with a small byte-fallback BPE
// tokenizer shaped like Gemma's (Replace " " -> "▁" normalizer, Split
// pre-tokenizer, added tokens that overlap each other and ordinary text,
// Replace + ByteFallback + Fuse decoder). Invalid UTF-8 must be refused with
// a Status; valid text without a literal "▁" must round-trip exactly through
// Decode, and every id must be in the vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

const g4::Tokenizer& Tok() {
  static const g4::Tokenizer* tok = [] {
    nlohmann::json vocab = nlohmann::json::object();
    int id = 0;
    for (const char* special : {"<pad>", "<eos>", "<bos>", "<unk>"}) vocab[special] = id++;
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      vocab[name] = id++;
    }
    for (const char* piece : {"\xE2\x96\x81", "a", "b", "c", "ab", "bc", "abc", "\xE2\x96\x81" "a", "t", "h", "e",
                              "th", "the", "\xE2\x96\x81the", "\n"})
      vocab[piece] = id++;
    // json::array explicitly: a braced list of pairs would become an object.
    nlohmann::json merges = nlohmann::json::array();
    for (auto [left, right] : {std::pair{"a", "b"}, {"b", "c"}, {"a", "bc"}, {"\xE2\x96\x81", "a"}, {"t", "h"},
                               {"th", "e"}, {"\xE2\x96\x81", "the"}})
      merges.push_back(nlohmann::json::array({left, right}));
    nlohmann::json added = nlohmann::json::array();
    int next = id;
    for (const char* content : {"<|turn>", "<turn|>", "<|", "\n\n", "aaaa", "aa"})
      added.push_back({{"id", next++}, {"content", content}, {"special", true}});
    added.push_back({{"id", vocab["<bos>"]}, {"content", "<bos>"}, {"special", true}});
    added.push_back({{"id", vocab["\n"]}, {"content", "\n"}, {"special", false}});
    nlohmann::json doc = nlohmann::json::parse(R"({
      "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
      "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                        "invert": false},
      "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]},
      "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true}
    })");
    doc["added_tokens"] = added;
    doc["model"]["vocab"] = vocab;
    doc["model"]["merges"] = merges;
    auto t = g4::Tokenizer::FromJson(doc.dump(), "fuzz-encode.json");
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      __builtin_trap();
    }
    return new g4::Tokenizer(std::move(t).value());
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const g4::Tokenizer& tok = Tok();
  auto ids = tok.Encode(text);
  const bool valid = g4::utf8::FindInvalid(text) == g4::utf8::kValid;
  if (ids.ok() != valid) __builtin_trap();
  if (!ids.ok()) {
    if (ids.status().message().rfind("[tokenizer] ", 0) != 0) __builtin_trap();
    return 0;
  }
  for (int32_t id : *ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  // The decoder turns "▁" back into " ", so text that already holds a "▁"
  // cannot round-trip (in HF either).
  if (text.find("\xE2\x96\x81") == std::string_view::npos && tok.Decode(*ids) != text) __builtin_trap();
  return 0;
}
