#include "tokenizer/tokenizer_json.h"

#include <exception>
#include <new>

#include "core/limits.h"

namespace g4 {
namespace {

using json = nlohmann::json;

// Builds a DOM like nlohmann's own SAX DOM parser, except that the object at
// model.vocab and the array at model.merges are diverted into `out`.
class Handler : public nlohmann::json_sax<json> {
 public:
  Handler(TokenizerJson* out, const std::string& name) : out_(out), name_(name) {}

  const std::string& error() const { return error_; }

  bool null() override { return Value(json(nullptr), "null"); }
  bool boolean(bool v) override { return Value(json(v), "a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) {
      if (v < 0) return Fail("vocab entry '" + vocab_key_ + "' has negative id " + std::to_string(v));
      out_->vocab.emplace_back(std::move(vocab_key_), v);
      return true;
    }
    return Value(json(v), "a number");
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) {
      if (v > static_cast<uint64_t>(INT32_MAX))
        return Fail("vocab entry '" + vocab_key_ + "' has id " + std::to_string(v) + " past 2^31");
      out_->vocab.emplace_back(std::move(vocab_key_), static_cast<int64_t>(v));
      return true;
    }
    return Value(json(v), "a number");
  }
  bool number_float(number_float_t v, const string_t&) override { return Value(json(v), "a float"); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      // HF splits the string form on ' ' and wants exactly two parts.
      const size_t sp = v.find(' ');
      if (sp == std::string::npos || v.find(' ', sp + 1) != std::string::npos)
        return Fail("merge #" + std::to_string(out_->merges.size()) + " '" + v + "' is not two tokens separated by one space");
      out_->merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_count_ >= 2) return Fail("merge #" + std::to_string(out_->merges.size()) + " has more than two tokens");
      pair_[pair_count_++] = std::move(v);
      return true;
    }
    return Value(json(std::move(v)), "a string");
  }
  bool binary(binary_t&) override { return Fail("unexpected binary value"); }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return Fail(Where() + " holds an object");
    if (stack_.size() == 2 && keys_[1] == "model" && key_ == "vocab") {
      if (out_->has_vocab) return Fail("model.vocab appears twice");
      mode_ = Mode::kVocab;
      out_->has_vocab = true;
      out_->vocab.reserve(1 << 18);
      return true;
    }
    return Open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_count_ = 0;
      return true;
    }
    if (mode_ != Mode::kDom) return Fail(Where() + " holds an array");
    if (stack_.size() == 2 && keys_[1] == "model" && key_ == "merges") {
      if (out_->has_merges) return Fail("model.merges appears twice");
      mode_ = Mode::kMerges;
      out_->has_merges = true;
      out_->merges.reserve(1 << 19);
      return true;
    }
    return Open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_count_ != 2) return Fail("merge #" + std::to_string(out_->merges.size()) + " does not have two tokens");
      out_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's message already says "at line L, column C"; keep the byte offset too.
    std::string what = e.what();
    const size_t colon = what.find("] ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    error_ = "[tokenizer] " + name_ + ": malformed JSON near byte " + std::to_string(position) + ": " + what;
    return false;
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool Fail(const std::string& what) {
    error_ = "[tokenizer] " + name_ + ": " + what;
    return false;
  }
  std::string Where() const {
    if (mode_ == Mode::kVocab) return "vocab entry '" + vocab_key_ + "'";
    return "merge #" + std::to_string(out_->merges.size());
  }
  // Places a scalar or a fresh container in the DOM; returns where it went
  // (nullptr past kMaxJsonValues or on a repeated key).
  json* Place(json&& v) {
    if (++dom_values_ > kMaxJsonValues) {
      Fail("more than " + std::to_string(kMaxJsonValues) + " JSON values outside model.vocab and model.merges (kMaxJsonValues)");
      return nullptr;
    }
    if (stack_.empty()) {
      out_->doc = std::move(v);
      return &out_->doc;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    auto [it, inserted] = top->get_ref<json::object_t&>().emplace(key_, std::move(v));
    if (!inserted) {
      Fail("key \"" + key_ + "\" appears twice in one object");
      return nullptr;
    }
    return &it->second;
  }
  bool Value(json&& v, const char* kind) {
    if (mode_ == Mode::kVocab) return Fail("vocab entry '" + vocab_key_ + "' is " + kind + ", not an id");
    if (mode_ != Mode::kDom) return Fail(Where() + " holds " + kind + ", not a token string");
    return Place(std::move(v)) != nullptr;
  }
  bool Open(json&& container) {
    // The DOM part nests a few levels (a decoder Sequence of steps); a
    // hostile file nests 100,000 deep, which the recursive step readers in
    // text_pipeline.cc must never see.
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth))
      return Fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (kMaxJsonDepth)");
    // A container's key is remembered so model.vocab / model.merges can be
    // recognised by path.
    std::string key = stack_.empty() || stack_.back()->is_array() ? std::string() : key_;
    json* slot = Place(std::move(container));
    if (slot == nullptr) return false;
    stack_.push_back(slot);
    keys_.push_back(std::move(key));
    return true;
  }

  TokenizerJson* out_;
  const std::string& name_;
  std::string error_;
  Mode mode_ = Mode::kDom;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;
  std::string key_;
  std::string vocab_key_;
  std::string pair_[2];
  int pair_count_ = 0;
  uint64_t dom_values_ = 0;
};

}  // namespace

StatusOr<TokenizerJson> ParseTokenizerJson(std::string_view text, const std::string& name) {
  TokenizerJson out;
  Handler handler(&out, name);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &handler);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("[tokenizer] " + name + ": out of memory while parsing");
  } catch (const std::exception& e) {
    return Corrupt("[tokenizer] " + name + ": " + e.what());
  }
  if (!ok) return Corrupt(handler.error().empty() ? "[tokenizer] " + name + ": malformed JSON" : handler.error());
  return out;
}

}  // namespace g4
