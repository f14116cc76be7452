// StreamDecoder: pushing ids one at a time yields Decode's text in pieces,
// each valid UTF-8, with byte-fallback characters held until complete.
#include "tokenizer/stream_decoder.h"

#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gemma_tokenizer.h"
#include "tokenizer/utf8.h"

namespace g4 {
namespace {

using testing::GemmaTokenizer;
using testing::MustEncode;

bool ValidUtf8(std::string_view s) { return utf8::FindInvalid(s) == utf8::kValid; }

std::string Stream(const std::vector<int32_t>& ids, std::vector<std::string>* pieces = nullptr) {
  StreamDecoder dec(GemmaTokenizer());
  std::string all;
  for (int32_t id : ids) {
    std::string piece = dec.Push(id);
    if (pieces) pieces->push_back(piece);
    all += piece;
  }
  std::string tail = dec.Finish();
  if (pieces) pieces->push_back(tail);
  return all + tail;
}

std::vector<std::string> GoldenTexts() {
  std::ifstream in(testing::TestDataPath("tokenizer/encode_golden.json"));
  const auto golden = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  for (const auto& c : golden.at("cases")) texts.push_back(c.at("text"));
  return texts;
}

int32_t ByteToken(int b) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", b);
  return GemmaTokenizer().PieceToId(name).value();
}

// Golden texts cut at random character boundaries and encoded piece by
// piece, so token boundaries (and byte-fallback runs) fall in new places.
TEST(StreamDecoder, RandomSplitsOfGoldenTextsMatchDecode) {
  std::mt19937 rng(1234);
  for (const std::string& text : GoldenTexts()) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<size_t> cuts = {0};
      for (size_t i = 1; i < text.size(); ++i)
        if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80 && rng() % 5 == 0) cuts.push_back(i);
      cuts.push_back(text.size());
      std::vector<int32_t> ids;
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        auto part = MustEncode(std::string_view(text).substr(cuts[k], cuts[k + 1] - cuts[k]));
        ids.insert(ids.end(), part.begin(), part.end());
      }
      const std::string decoded = GemmaTokenizer().Decode(ids);
      EXPECT_EQ(decoded, text);
      std::vector<std::string> pieces;
      EXPECT_EQ(Stream(ids, &pieces), decoded);
      for (const std::string& p : pieces) EXPECT_TRUE(ValidUtf8(p)) << text;
    }
  }
}

TEST(StreamDecoder, CharacterOverFourByteTokensAppearsWhenComplete) {
  const std::string ch = "\xF4\x8F\xBF\xBD";  // U+10FFFD: not in the vocabulary
  const auto ids = MustEncode(ch);
  ASSERT_EQ(ids.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ids[k], ByteToken(static_cast<uint8_t>(ch[k])));
  StreamDecoder dec(GemmaTokenizer());
  EXPECT_EQ(dec.Push(ids[0]), "");
  EXPECT_EQ(dec.Push(ids[1]), "");
  EXPECT_EQ(dec.Push(ids[2]), "");
  EXPECT_EQ(dec.Push(ids[3]), ch);
  EXPECT_EQ(dec.Finish(), "");
}

TEST(StreamDecoder, UnfinishedCharacterBecomesReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  const std::vector<int32_t> head = {ByteToken(0xF0), ByteToken(0x9F)};
  {
    StreamDecoder dec(GemmaTokenizer());
    EXPECT_EQ(dec.Push(head[0]), "");
    EXPECT_EQ(dec.Push(head[1]), "");
    EXPECT_EQ(dec.Finish(), fffd + fffd);
    EXPECT_EQ(GemmaTokenizer().Decode(head), fffd + fffd);
  }
  {
    // An ordinary token ends the run; as in Decode, each stray byte is one U+FFFD.
    std::vector<int32_t> ids = head;
    const auto hello = MustEncode("Hello");
    ids.insert(ids.end(), hello.begin(), hello.end());
    EXPECT_EQ(Stream(ids), fffd + fffd + "Hello");
    EXPECT_EQ(GemmaTokenizer().Decode(ids), fffd + fffd + "Hello");
  }
  {
    // A lone continuation byte and a byte that cannot occur in UTF-8.
    const std::vector<int32_t> ids = {ByteToken(0x80), ByteToken(0xFF)};
    EXPECT_EQ(Stream(ids), fffd + fffd);
    EXPECT_EQ(GemmaTokenizer().Decode(ids), fffd + fffd);
  }
}

TEST(StreamDecoder, SpecialTokensPassThrough) {
  const auto ids = MustEncode("<|turn>model\n<|channel>thought\n<channel|>Hi<turn|>");
  EXPECT_EQ(Stream(ids), "<|turn>model\n<|channel>thought\n<channel|>Hi<turn|>");
}

// Random mixes of ordinary tokens and byte tokens spelling random valid
// characters: the stream equals Decode, piece by piece valid.
TEST(StreamDecoder, RandomValidByteRunsMatchDecode) {
  std::mt19937 rng(99);
  const int32_t vocab = GemmaTokenizer().vocab_size();
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids;
    const int n = 1 + rng() % 40;
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        uint32_t cp;
        do cp = rng() % 0x110000;
        while (cp >= 0xD800 && cp < 0xE000);
        std::string bytes;
        if (cp < 0x80) bytes = {static_cast<char>(cp)};
        else if (cp < 0x800) bytes = {static_cast<char>(0xC0 | cp >> 6), static_cast<char>(0x80 | (cp & 0x3F))};
        else if (cp < 0x10000)
          bytes = {static_cast<char>(0xE0 | cp >> 12), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                   static_cast<char>(0x80 | (cp & 0x3F))};
        else
          bytes = {static_cast<char>(0xF0 | cp >> 18), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                   static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
        for (char b : bytes) ids.push_back(ByteToken(static_cast<uint8_t>(b)));
      } else {
        ids.push_back(static_cast<int32_t>(rng() % vocab));
      }
    }
    std::vector<std::string> pieces;
    const std::string streamed = Stream(ids, &pieces);
    // Random ordinary ids may themselves be byte tokens; only compare when
    // every byte run is valid UTF-8, which the generator mostly ensures.
    const std::string decoded = GemmaTokenizer().Decode(ids);
    EXPECT_TRUE(ValidUtf8(decoded));
    for (const std::string& p : pieces) EXPECT_TRUE(ValidUtf8(p));
    if (decoded.find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(streamed, decoded) << "trial " << trial;
    }
  }
}

// Arbitrary ids, byte tokens included at random: output stays valid UTF-8.
TEST(StreamDecoder, ArbitraryIdsNeverEmitInvalidUtf8) {
  std::mt19937 rng(7);
  std::vector<int32_t> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(ByteToken(b));
  StreamDecoder dec(GemmaTokenizer());
  std::string all;
  for (int i = 0; i < 20000; ++i) {
    const int32_t id = rng() % 2 ? bytes[rng() % 256] : static_cast<int32_t>(rng() % 262200) - 20;
    const std::string piece = dec.Push(id);
    ASSERT_TRUE(ValidUtf8(piece)) << "after id " << id;
    all += piece;
  }
  all += dec.Finish();
  EXPECT_TRUE(ValidUtf8(all));
}

}  // namespace
}  // namespace g4
