// libFuzzer target: Tokenizer::FromJson on arbitrary tokenizer.json text must
// give a Status or a tokenizer, never crash, hang or blow up memory (deep
// Sequence nesting, Replace chains, huge added tokens). A tokenizer it
// accepts must encode and decode a fixed text, and the input itself, with
// every id inside its vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace {

void CheckIds(const g4::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
    if (!tok.IdToPiece(id)) __builtin_trap();
  }
  (void)tok.Decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = g4::Tokenizer::FromJson(text, "fuzz.json");
  if (!tok.ok()) {
    if (tok.status().message().rfind("[tokenizer] ", 0) != 0) __builtin_trap();
    return 0;
  }
  for (std::string_view sample : {std::string_view("Hello world, abc <x> \xC3\xA9\n"), text.substr(0, 256)}) {
    auto ids = tok->Encode(sample);
    if (ids.ok()) CheckIds(*tok, *ids);
  }
  return 0;
}
