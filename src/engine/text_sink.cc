#include "engine/text_sink.h"

namespace g4 {
namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TextSink::TextSink(const Tokenizer& tokenizer, std::vector<int> stop_ids, std::vector<std::string> stop_strings,
                   std::function<void(std::string_view)> on_text, const std::atomic<bool>* cancel)
    : stops_(stop_ids, stop_strings),
      decoder_(tokenizer),
      on_text_(std::move(on_text)),
      cancel_(cancel),
      start_(std::chrono::steady_clock::now()) {}

bool TextSink::OnToken(int32_t token, const LogProbs* logprobs) {
  if (result_.tokens.empty() && !stopped_by_text_) {
    result_.prefill_seconds = Since(start_);
    decode_start_ = std::chrono::steady_clock::now();
  }
  StopMatcher::Step s = stops_.Feed(token, decoder_.Push(token));
  Emit(s.text);
  if (s.stopped) {
    stopped_by_text_ = true;
    return false;
  }
  result_.tokens.push_back(token);
  if (logprobs) result_.logprobs.push_back(*logprobs);
  if (cancel_ && cancel_->load()) {
    cancelled_ = true;
    return false;
  }
  return true;
}

void TextSink::OnFinish(FinishReason reason, KvSeq seq, const Status& status) {
  finished_ = true;
  status_ = status;
  seq_ = std::move(seq);
  if (result_.tokens.empty() && result_.prefill_seconds == 0) result_.prefill_seconds = Since(start_);
  if (!result_.tokens.empty()) result_.decode_seconds = Since(decode_start_);
  if (cancelled_) {
    result_.finish_reason = "cancelled";
  } else if (reason == FinishReason::kStop) {
    result_.finish_reason = "stop";
  } else {
    result_.finish_reason = FinishReasonName(reason);
  }
  if (!stopped_by_text_) Emit(stops_.Feed(-1, decoder_.Finish()).text + stops_.Flush());
}

void TextSink::Emit(const std::string& text) {
  if (text.empty()) return;
  result_.text += text;
  if (on_text_) on_text_(text);
}

}  // namespace g4
