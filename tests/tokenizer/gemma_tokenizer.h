// The Gemma 4 tokenizer from testdata, loaded once per test binary.
#pragma once

#include <cstdlib>

#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace g4::testing {

inline std::string GemmaTokenizerPath() { return TestDataPath("tokenizer/tokenizer.json"); }

inline const Tokenizer& GemmaTokenizer() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::Load(GemmaTokenizerPath());
    if (!t.ok()) {
      ADD_FAILURE() << t.status().ToString();
      std::abort();
    }
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

inline std::vector<int32_t> MustEncode(std::string_view text) {
  auto ids = GemmaTokenizer().Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

}  // namespace g4::testing
