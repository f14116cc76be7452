// Special tokens and chat markup, against the ids listed in the architecture
// doc (section 6), which come from the released Gemma 4 tokenizer.
#include <gtest/gtest.h>

#include "gemma_tokenizer.h"

namespace g4 {
namespace {

using testing::GemmaTokenizer;
using testing::MustEncode;

TEST(TokenizerSpecial, VocabularySize) { EXPECT_EQ(GemmaTokenizer().vocab_size(), 262144); }

TEST(TokenizerSpecial, ControlTokenIds) {
  const std::vector<std::pair<std::string, int32_t>> table = {
      {"<pad>", 0},           {"<eos>", 1},          {"<bos>", 2},
      {"<|tool>", 46},        {"<tool|>", 47},       {"<|tool_call>", 48},
      {"<tool_call|>", 49},   {"<|tool_response>", 50}, {"<tool_response|>", 51},
      {"<|\"|>", 52},         {"<|think|>", 98},     {"<|channel>", 100},
      {"<channel|>", 101},    {"<|turn>", 105},      {"<turn|>", 106},
      {"<|image>", 255999},   {"<image|>", 258882},  {"<|audio>", 256000},
      {"<audio|>", 258883},   {"<|image|>", 258880}, {"<|audio|>", 258881},
      {"<|video|>", 258884},
  };
  const Tokenizer& tok = GemmaTokenizer();
  for (const auto& [text, id] : table) {
    EXPECT_EQ(tok.AddedTokenId(text), id) << text;
    EXPECT_EQ(tok.PieceToId(text), id) << text;
    EXPECT_EQ(tok.IdToPiece(id), text) << id;
    EXPECT_TRUE(tok.IsSpecial(id)) << text;
    EXPECT_EQ(MustEncode(text), std::vector<int32_t>{id}) << text;
    EXPECT_EQ(tok.Decode(std::vector<int32_t>{id}), text);
  }
  EXPECT_EQ(MustEncode("\n"), std::vector<int32_t>{107});
  EXPECT_EQ(tok.AddedTokenId("\n"), 107);
  EXPECT_FALSE(tok.IsSpecial(107));
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_FALSE(tok.add_bos_token());
  EXPECT_EQ(tok.AddedTokenId("<start_of_turn>"), std::nullopt);
}

TEST(TokenizerSpecial, ChatMarkupFromDoc) {
  EXPECT_EQ(MustEncode("<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"),
            (std::vector<int32_t>{2, 105, 2364, 107, 3689, 563, 236743, 236778, 236862, 236778, 236881, 106, 107, 105,
                                  4368, 107, 100, 45518, 107, 101}));
  EXPECT_EQ(MustEncode("<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello.<turn|>\n"
                       "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"),
            (std::vector<int32_t>{2,   105,    9731, 107,   3048, 659,   17514, 236761, 106, 107, 105, 2364,
                                  107, 10979,  106,  107,   105,  4368,  107,   9259,   236761, 106, 107, 105,
                                  2364, 107,   98874, 106,  107,  105,   4368,  107,    100,   45518, 107, 101}));
}

TEST(TokenizerSpecial, OrdinaryTextFromDoc) {
  EXPECT_EQ(MustEncode("Hello, world!"), (std::vector<int32_t>{9259, 236764, 1902, 236888}));
  EXPECT_EQ(MustEncode("The quick brown fox jumps over the lazy dog."),
            (std::vector<int32_t>{818, 3823, 8864, 37423, 38167, 1024, 506, 31770, 4799, 236761}));
  // Gemma 3's turn marker is ordinary text in Gemma 4.
  EXPECT_EQ(MustEncode("<start_of_turn>"), (std::vector<int32_t>{236820, 3041, 236779, 1340, 236779, 887, 236813}));
}

TEST(TokenizerSpecial, PieceLookups) {
  const Tokenizer& tok = GemmaTokenizer();
  EXPECT_EQ(tok.PieceToId("<0x0A>"), tok.PieceToId("<0x0A>"));
  ASSERT_TRUE(tok.PieceToId("<0x41>").has_value());
  EXPECT_EQ(tok.IdToPiece(*tok.PieceToId("<0x41>")), "<0x41>");
  EXPECT_EQ(tok.PieceToId("no such piece, surely"), std::nullopt);
  EXPECT_EQ(tok.IdToPiece(-1), std::nullopt);
  EXPECT_EQ(tok.IdToPiece(262144), std::nullopt);
  // Every id round-trips through its piece.
  for (int32_t id = 0; id < tok.vocab_size(); id += 97) {
    auto piece = tok.IdToPiece(id);
    ASSERT_TRUE(piece.has_value()) << id;
    EXPECT_EQ(tok.PieceToId(*piece), id);
  }
}

TEST(TokenizerSpecial, LongestAddedTokenWins) {
  // "\n\n\n" is one added token, not three "\n".
  const auto ids = MustEncode("a\n\n\nb");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], GemmaTokenizer().AddedTokenId("\n\n\n"));
}

TEST(TokenizerSpecial, DecodeSkipsOutOfRangeIds) {
  EXPECT_EQ(GemmaTokenizer().Decode(std::vector<int32_t>{-5, 105, 262144, 106, 1 << 30}), "<|turn><turn|>");
}

}  // namespace
}  // namespace g4
