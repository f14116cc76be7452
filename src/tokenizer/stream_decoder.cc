#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace g4 {

std::string StreamDecoder::Push(int32_t id) {
  std::string out;
  auto token = tokenizer_.DecodeToken(id);
  if (!token) return out;
  if (tokenizer_.joins_with_space() && !first_) out += ' ';
  first_ = false;
  if (token->byte >= 0) {
    AppendByte(static_cast<uint8_t>(token->byte), &out);
  } else {
    FlushPending(&out);
    out += token->text;
  }
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out;
  FlushPending(&out);
  first_ = true;
  return out;
}

void StreamDecoder::AppendByte(uint8_t byte, std::string* out) {
  if (pending_len_ > 0) {
    if (utf8::ValidContinuation(pending_, pending_len_, byte)) {
      pending_[pending_len_++] = byte;
      if (pending_len_ == expected_len_) {
        out->append(reinterpret_cast<const char*>(pending_), pending_len_);
        pending_len_ = 0;
      }
      return;
    }
    FlushPending(out);  // the byte cannot continue it; it may start a new one
  }
  const int len = utf8::SequenceLength(byte);
  if (len == 1) {
    out->push_back(static_cast<char>(byte));
  } else if (len == 0) {
    out->append(utf8::kReplacement);
  } else {
    pending_[0] = byte;
    pending_len_ = 1;
    expected_len_ = len;
  }
}

void StreamDecoder::FlushPending(std::string* out) {
  for (int i = 0; i < pending_len_; ++i) out->append(utf8::kReplacement);
  pending_len_ = 0;
}

}  // namespace g4
