// Status and StatusOr: how fallible calls report errors across module
// boundaries (loader, tokenizer, KV allocation, requests). g4 throws no
// exceptions of its own; third-party exceptions are caught at the adapter.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace g4 {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is wrong (bad flag, bad id, bad JSON)
  kNotFound,          // a file, tensor or key is missing
  kCorrupt,           // a file exists but its bytes disagree with its own header
  kUnsupported,       // valid, but g4 does not implement it
  kOutOfRange,        // an index or size past a limit
  kResourceExhausted, // does not fit in memory / budget
  kIoError,           // the OS refused (open, mmap, write, fsync)
  kInternal,          // a g4 bug
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: [safetensors] model.safetensors: header length 9e9 past end of file"
  std::string ToString() const;
  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}                  // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) {            // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "StatusOr built from OK status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace g4

#define G4_CONCAT_INNER(a, b) a##b
#define G4_CONCAT(a, b) G4_CONCAT_INNER(a, b)

#define G4_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::g4::Status g4_status_ = (expr);     \
    if (!g4_status_.ok()) return g4_status_; \
  } while (0)

#define G4_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

// Expands to several statements: use it inside braces, never as the body of a
// bare if/else.
#define G4_ASSIGN_OR_RETURN(lhs, expr) G4_ASSIGN_OR_RETURN_IMPL(G4_CONCAT(g4_or_, __LINE__), lhs, expr)
