#include "io/safetensors_header.h"

#include <exception>
#include <new>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/limits.h"

namespace g4::safetensors_internal {
namespace {

using json = nlohmann::json;

// Error messages quote values at most this long: a hostile header can make
// any value arbitrarily long.
constexpr size_t kMaxQuoted = 80;

void AppendCapped(std::string* out, std::string_view s) {
  if (out->size() > kMaxQuoted) return;
  out->append(s);
  if (out->size() > kMaxQuoted) {
    out->resize(kMaxQuoted - 3);
    out->append("...");
  }
}

// One scalar value as the SAX parser delivers it.
struct Scalar {
  enum class Type { kNull, kBool, kInt, kUint, kFloat, kString } type;
  int64_t i = 0;
  uint64_t u = 0;
  std::string text;  // as written (numbers, strings unquoted)

  const char* TypeName() const {
    switch (type) {
      case Type::kNull: return "null";
      case Type::kBool: return "boolean";
      case Type::kString: return "string";
      default: return "number";
    }
  }
  // The value as uint64 when it is a non-negative integer ("-0" included).
  std::optional<uint64_t> NonNegative() const {
    if (type == Type::kUint) return u;
    if (type == Type::kInt && i >= 0) return static_cast<uint64_t>(i);
    return std::nullopt;
  }
};

class HeaderHandler final : public nlohmann::json_sax<json> {
 public:
  HeaderHandler(const std::string& label, std::vector<RawEntry>* entries, std::map<std::string, std::string>* metadata)
      : prefix_("[safetensors] " + label + ": "), entries_(entries), metadata_(metadata) {}

  const Status& status() const { return status_; }

  bool null() override { return OnScalar({Scalar::Type::kNull, 0, 0, "null"}); }
  bool boolean(bool v) override { return OnScalar({Scalar::Type::kBool, 0, 0, v ? "true" : "false"}); }
  bool number_integer(number_integer_t v) override {
    return OnScalar({Scalar::Type::kInt, v, 0, std::to_string(v)});
  }
  bool number_unsigned(number_unsigned_t v) override {
    return OnScalar({Scalar::Type::kUint, 0, v, std::to_string(v)});
  }
  bool number_float(number_float_t, const string_t& raw) override {
    return OnScalar({Scalar::Type::kFloat, 0, 0, raw});
  }
  bool string(string_t& v) override { return OnScalar({Scalar::Type::kString, 0, 0, std::move(v)}); }
  bool binary(binary_t&) override { return Fail(Corrupt(prefix_ + "header holds a binary value")); }

  bool start_object(std::size_t) override { return OnOpen(/*is_object=*/true); }
  bool start_array(std::size_t) override { return OnOpen(/*is_object=*/false); }
  bool end_object() override { return OnClose(); }
  bool end_array() override { return OnClose(); }

  bool key(string_t& k) override {
    switch (state_) {
      case State::kTop:
        if (k == "__metadata__") {
          if (seen_metadata_) return Fail(Corrupt(prefix_ + "header names '__metadata__' twice"));
          seen_metadata_ = true;
        }
        key_ = std::move(k);
        return true;
      case State::kMetadata:
        if (metadata_->count(k)) return Fail(Corrupt(prefix_ + "__metadata__ names '" + k + "' twice"));
        key_ = std::move(k);
        return true;
      case State::kEntry: {
        field_ = k == "dtype" ? Field::kDtype : k == "shape" ? Field::kShape
               : k == "data_offsets" ? Field::kOffsets : Field::kOther;
        if (field_ == Field::kOther) return true;
        const int bit = 1 << static_cast<int>(field_);
        if (seen_fields_ & bit) return Fail(Corrupt(Where() + "\"" + k + "\" appears twice"));
        seen_fields_ |= bit;
        return true;
      }
      default:  // kSkip
        return true;
    }
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    return Fail(Corrupt(prefix_ + "header is not valid JSON: " + JsonErrorText(e) + " (byte " +
                        std::to_string(position) + ")"));
  }

 private:
  enum class State { kStart, kTop, kMetadata, kEntry, kShape, kOffsets, kSkip, kDone };
  enum class Field { kDtype, kShape, kOffsets, kOther };

  bool Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
    return false;
  }
  std::string Where() const { return prefix_ + "tensor '" + entry_.name + "': "; }

  bool OnScalar(Scalar v) {
    switch (state_) {
      case State::kStart:
        return Fail(Corrupt(prefix_ + "header is a JSON " + v.TypeName() + ", not an object"));
      case State::kTop:
        if (key_ == "__metadata__")
          return Fail(Corrupt(prefix_ + "__metadata__ is a " + v.TypeName() + ", not an object"));
        return Fail(Corrupt(prefix_ + "tensor '" + key_ + "': entry is a " + v.TypeName() + ", not an object"));
      case State::kMetadata:
        if (v.type != Scalar::Type::kString)
          return Fail(Corrupt(prefix_ + "__metadata__ value for '" + key_ + "' is a " + v.TypeName() +
                              ", not a string"));
        (*metadata_)[std::move(key_)] = std::move(v.text);
        return true;
      case State::kEntry:
        return EntryScalar(std::move(v));
      case State::kShape:
        return ShapeDim(v);
      case State::kOffsets:
        AppendCapped(&offsets_text_, offsets_count_ ? ", " : "");
        AppendCapped(&offsets_text_, v.text);
        if (auto u = v.NonNegative(); u && offsets_count_ < 2) {
          offsets_[offsets_count_] = *u;
        } else {
          offsets_bad_ = true;
        }
        ++offsets_count_;
        return true;
      case State::kSkip:
        return true;
      case State::kDone:
        break;
    }
    return Fail(Internal(prefix_ + "header parser in an impossible state"));
  }

  bool EntryScalar(Scalar v) {
    switch (field_) {
      case Field::kDtype: {
        if (v.type != Scalar::Type::kString)
          return Fail(Corrupt(Where() + "\"dtype\" is a " + v.TypeName() + ", not a string"));
        std::optional<DType> dtype = ParseDType(v.text);
        if (!dtype) return Fail(Unsupported(Where() + "unknown dtype '" + v.text.substr(0, kMaxQuoted) + "'"));
        entry_.dtype = *dtype;
        dtype_name_ = std::move(v.text);
        return true;
      }
      case Field::kShape:
        return Fail(Corrupt(Where() + "\"shape\" is a " + v.TypeName() + ", not an array"));
      case Field::kOffsets:
        return Fail(Corrupt(Where() + "\"data_offsets\" is a " + v.TypeName() +
                            ", not [begin, end] of non-negative integers"));
      case Field::kOther:
        return true;  // fields g4 does not use are ignored
    }
    return true;
  }

  bool ShapeDim(const Scalar& v) {
    std::optional<uint64_t> dim = v.NonNegative();
    if (!dim) {
      if (v.type == Scalar::Type::kInt) return Fail(Corrupt(Where() + "negative dimension " + v.text + " in shape"));
      std::string shown;
      AppendCapped(&shown, v.text);
      return Fail(Corrupt(Where() + "shape dimension " + shown + " is not an integer"));
    }
    AppendCapped(&shape_text_, entry_.shape.empty() && !shape_overflow_ ? "" : ", ");
    AppendCapped(&shape_text_, v.text);
    if (*dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel_, *dim, &numel_)) {
      shape_overflow_ = true;
      return true;  // reported at the end of the shape, with the whole shape
    }
    entry_.shape.push_back(static_cast<int64_t>(*dim));
    return true;
  }

  bool OnOpen(bool is_object) {
    const char* type = is_object ? "object" : "array";
    switch (state_) {
      case State::kStart:
        if (!is_object) return Fail(Corrupt(prefix_ + "header is a JSON array, not an object"));
        state_ = State::kTop;
        return true;
      case State::kTop:
        if (!is_object) {
          if (key_ == "__metadata__") return Fail(Corrupt(prefix_ + "__metadata__ is an array, not an object"));
          return Fail(Corrupt(prefix_ + "tensor '" + key_ + "': entry is an array, not an object"));
        }
        if (key_ == "__metadata__") {
          state_ = State::kMetadata;
        } else {
          StartEntry();
        }
        return true;
      case State::kMetadata:
        return Fail(Corrupt(prefix_ + "__metadata__ value for '" + key_ + "' is an " + type + ", not a string"));
      case State::kEntry:
        if (field_ == Field::kShape && !is_object) {
          state_ = State::kShape;
          return true;
        }
        if (field_ == Field::kOffsets && !is_object) {
          state_ = State::kOffsets;
          return true;
        }
        if (field_ == Field::kDtype) return Fail(Corrupt(Where() + "\"dtype\" is an " + type + ", not a string"));
        if (field_ == Field::kShape) return Fail(Corrupt(Where() + "\"shape\" is an object, not an array"));
        if (field_ == Field::kOffsets)
          return Fail(Corrupt(Where() + "\"data_offsets\" is an object, not [begin, end] of non-negative integers"));
        state_ = State::kSkip;  // an unused field: skipped, within the depth limit
        skip_depth_ = 1;
        return true;
      case State::kShape:
        return Fail(Corrupt(Where() + "shape dimension is an " + type + ", not an integer"));
      case State::kOffsets:
        return Fail(Corrupt(Where() + "\"data_offsets\" holds an " + type +
                            ", not [begin, end] of non-negative integers"));
      case State::kSkip:
        // The entry sits at depth 2; its skipped field opens at depth 3.
        if (2 + ++skip_depth_ > kMaxJsonDepth)
          return Fail(Corrupt(Where() + "nested deeper than " + std::to_string(kMaxJsonDepth) +
                              " levels (kMaxJsonDepth)"));
        return true;
      case State::kDone:
        break;
    }
    return Fail(Internal(prefix_ + "header parser in an impossible state"));
  }

  bool OnClose() {
    switch (state_) {
      case State::kTop:
        state_ = State::kDone;
        return true;
      case State::kMetadata:
        state_ = State::kTop;
        return true;
      case State::kEntry:
        state_ = State::kTop;
        return FinishEntry();
      case State::kShape:
        state_ = State::kEntry;
        shape_done_ = true;
        if (shape_overflow_) return Fail(Corrupt(Where() + "shape [" + shape_text_ + "] overflows 64 bits"));
        return true;
      case State::kOffsets:
        state_ = State::kEntry;
        offsets_done_ = true;
        if (offsets_bad_ || offsets_count_ != 2)
          return Fail(Corrupt(Where() + "\"data_offsets\" [" + offsets_text_ +
                              "] is not [begin, end] of non-negative integers"));
        return true;
      case State::kSkip:
        if (--skip_depth_ == 0) state_ = State::kEntry;
        return true;
      default:
        break;
    }
    return Fail(Internal(prefix_ + "header parser in an impossible state"));
  }

  void StartEntry() {
    state_ = State::kEntry;
    entry_ = RawEntry();
    entry_.name = std::move(key_);
    seen_fields_ = 0;
    field_ = Field::kOther;
    numel_ = 1;
    shape_overflow_ = shape_done_ = offsets_done_ = offsets_bad_ = false;
    shape_text_.clear();
    offsets_text_.clear();
    offsets_count_ = 0;
  }

  bool FinishEntry() {
    if (!(seen_fields_ & (1 << static_cast<int>(Field::kDtype)))) return Fail(Corrupt(Where() + "missing \"dtype\""));
    if (!shape_done_) return Fail(Corrupt(Where() + "missing \"shape\""));
    if (numel_ > static_cast<uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(numel_, static_cast<uint64_t>(DTypeSize(entry_.dtype)), &entry_.nbytes))
      return Fail(Corrupt(Where() + "shape [" + shape_text_ + "] x " + dtype_name_ + " overflows 64 bits"));
    if (!offsets_done_) return Fail(Corrupt(Where() + "missing \"data_offsets\""));
    entry_.begin = offsets_[0];
    entry_.end = offsets_[1];
    if (entry_.begin > entry_.end)
      return Fail(Corrupt(Where() + "data_offsets [" + std::to_string(entry_.begin) + ", " +
                          std::to_string(entry_.end) + "]: begin > end"));
    entries_->push_back(std::move(entry_));
    return true;
  }

  const std::string prefix_;
  std::vector<RawEntry>* entries_;
  std::map<std::string, std::string>* metadata_;
  Status status_;

  State state_ = State::kStart;
  std::string key_;  // current top-level or __metadata__ key
  bool seen_metadata_ = false;
  int skip_depth_ = 0;

  // The entry being read.
  RawEntry entry_;
  Field field_ = Field::kOther;
  int seen_fields_ = 0;
  std::string dtype_name_;
  uint64_t numel_ = 1;
  bool shape_overflow_ = false, shape_done_ = false;
  std::string shape_text_;
  uint64_t offsets_[2] = {0, 0};
  int offsets_count_ = 0;
  bool offsets_bad_ = false, offsets_done_ = false;
  std::string offsets_text_;
};

}  // namespace

Status ParseHeader(const char* begin, const char* end, const std::string& label, std::vector<RawEntry>* entries,
                   std::map<std::string, std::string>* metadata) {
  HeaderHandler handler(label, entries, metadata);
  bool ok = false;
  try {
    ok = json::sax_parse(begin, end, &handler);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("[safetensors] " + label + ": out of memory reading the header");
  } catch (const std::exception& e) {
    return Corrupt("[safetensors] " + label + ": header is not valid JSON: " + JsonErrorText(e));
  }
  if (!ok) {
    if (!handler.status().ok()) return handler.status();
    return Corrupt("[safetensors] " + label + ": header is not valid JSON");
  }
  return Status::Ok();
}

}  // namespace g4::safetensors_internal
