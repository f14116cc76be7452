#include "core/json.h"

#include <exception>
#include <new>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace g4 {
namespace {

// Builds the DOM from SAX events, like nlohmann's json_sax_dom_parser, with
// the limits of JsonLimits. Only the innermost open container is ever
// appended to, so pointers to the open ancestors stay valid.
template <typename Json>
class BoundedDomBuilder final : public nlohmann::json_sax<Json> {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  BoundedDomBuilder(Json* root, const JsonLimits& limits) : root_(root), limits_(limits) {}

  const std::string& error() const { return error_; }
  bool limit_hit() const { return limit_hit_; }

  bool null() override { return Place(Json(nullptr)); }
  bool boolean(bool v) override { return Place(Json(v)); }
  bool number_integer(number_integer_t v) override { return Place(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Place(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Place(Json(v)); }
  bool string(string_t& v) override { return Place(Json(std::move(v))); }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool key(string_t& k) override {
    if (!limits_.reject_duplicate_keys) {
      key_ = std::move(k);
      return true;
    }
    if constexpr (kOrdered) {
      // ordered_json looks keys up linearly; a side set keeps this O(1).
      if (!key_sets_.back().insert(k).second) return Duplicate(k);
    } else {
      if (stack_.back()->contains(k)) return Duplicate(k);
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_array() override { return Close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = "not valid JSON: " + JsonErrorText(e) + " (byte " + std::to_string(position) + ")";
    return false;
  }

 private:
  static constexpr bool kOrdered = std::is_same_v<Json, nlohmann::ordered_json>;

  bool Fail(std::string what) {
    error_ = std::move(what);
    limit_hit_ = true;
    return false;
  }
  bool Duplicate(const std::string& k) {
    std::string where;
    for (const std::string& p : path_) {
      if (p.empty()) continue;
      if (!where.empty()) where += '.';
      where += p;
    }
    return Fail("key \"" + k + "\" appears twice in " + (where.empty() ? "the top-level object" : where));
  }
  // Counts a value and stores it; returns where it went (nullptr on failure).
  Json* Store(Json&& v) {
    if (++values_ > limits_.max_values) {
      Fail("more than " + std::to_string(limits_.max_values) + " JSON values (kMaxJsonValues)");
      return nullptr;
    }
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    Json* top = stack_.back();
    if (top->is_array()) {
      auto& arr = top->template get_ref<typename Json::array_t&>();
      arr.push_back(std::move(v));
      return &arr.back();
    }
    if (!limits_.reject_duplicate_keys) {  // nlohmann's rule: the last one wins
      Json& slot = (*top)[key_];
      slot = std::move(v);
      return &slot;
    }
    auto& obj = top->template get_ref<typename Json::object_t&>();
    if constexpr (kOrdered) {
      // Uniqueness was checked in key(); append without ordered_map's scan.
      using Base = std::vector<std::pair<const string_t, Json>>;
      Base& items = obj;
      items.emplace_back(std::move(key_), std::move(v));
      return &items.back().second;
    } else {
      return &obj.emplace(std::move(key_), std::move(v)).first->second;
    }
  }
  bool Place(Json&& v) { return Store(std::move(v)) != nullptr; }
  bool Open(Json&& container) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth)
      return Fail("nested deeper than " + std::to_string(limits_.max_depth) + " levels (kMaxJsonDepth)");
    const bool in_object = !stack_.empty() && stack_.back()->is_object();
    std::string name = in_object ? key_ : std::string();
    const bool is_object = container.is_object();
    Json* slot = Store(std::move(container));
    if (slot == nullptr) return false;
    stack_.push_back(slot);
    path_.push_back(std::move(name));
    if constexpr (kOrdered) {
      if (is_object && limits_.reject_duplicate_keys) key_sets_.emplace_back();
    }
    (void)is_object;
    return true;
  }
  bool Close() {
    if constexpr (kOrdered) {
      if (stack_.back()->is_object() && limits_.reject_duplicate_keys) key_sets_.pop_back();
    }
    stack_.pop_back();
    path_.pop_back();
    return true;
  }

  Json* root_;
  const JsonLimits& limits_;
  std::vector<Json*> stack_;
  std::vector<std::string> path_;  // key of each open container ("" inside arrays)
  std::vector<std::unordered_set<std::string>> key_sets_;  // ordered_json only
  string_t key_;
  uint64_t values_ = 0;
  std::string error_;
  bool limit_hit_ = false;
};

}  // namespace

std::string JsonErrorText(const std::exception& e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    const size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
  }
  return what;
}

template <typename Json>
StatusOr<Json> ParseJsonBounded(std::string_view text, std::string_view module, std::string_view label,
                                StatusCode error_code, const JsonLimits& limits) {
  std::string prefix(1, '[');
  prefix.append(module).append("] ");
  if (!label.empty()) prefix.append(label).append(": ");
  Json root;
  BoundedDomBuilder<Json> builder(&root, limits);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(prefix + "out of memory while parsing JSON");
  } catch (const std::exception& e) {
    return Status(error_code, prefix + "not valid JSON: " + JsonErrorText(e));
  }
  if (!ok) return Status(error_code, prefix + (builder.error().empty() ? "not valid JSON" : builder.error()));
  return root;
}

template StatusOr<nlohmann::json> ParseJsonBounded<nlohmann::json>(std::string_view, std::string_view,
                                                                   std::string_view, StatusCode,
                                                                   const JsonLimits&);
template StatusOr<nlohmann::ordered_json> ParseJsonBounded<nlohmann::ordered_json>(std::string_view,
                                                                                   std::string_view,
                                                                                   std::string_view, StatusCode,
                                                                                   const JsonLimits&);

}  // namespace g4
