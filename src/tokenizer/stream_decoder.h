// StreamDecoder: turns generated token ids into text as they arrive, for
// printing while generating. Push() returns only completed characters: a
// character spelled by several <0xNN> byte-fallback tokens (an emoji over
// four tokens) appears once its last byte arrives, never as a fragment, so
// every returned string is valid UTF-8 on its own.
//
// The concatenation of all Push() results and Finish() equals
// Tokenizer::Decode of the same ids whenever each run of byte tokens is
// valid UTF-8 (always true for ids produced by Encode). For invalid runs both
// write U+FFFD, but Decode, like HF, replaces the whole run byte by byte,
// while the stream cannot take back characters it already emitted
// (HF's own DecodeStream behaves the same way).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace g4 {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Text completed by `id` (often empty). Ids outside the vocabulary are
  // skipped, as Decode skips them.
  std::string Push(int32_t id);
  // Ends the stream: bytes of an unfinished character become one U+FFFD
  // each. The decoder is then ready for a new stream.
  std::string Finish();

 private:
  void AppendByte(uint8_t byte, std::string* out);
  void FlushPending(std::string* out);

  const Tokenizer& tokenizer_;
  uint8_t pending_[4] = {};
  int pending_len_ = 0;
  int expected_len_ = 0;
  bool first_ = true;
};

}  // namespace g4
