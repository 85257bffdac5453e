// Status and StatusOr<T>: the error type for everything a user, a request or a file can get
// wrong (formats, tokenizer, requests, config). Broken invariants use RADIXLM_CHECK instead.
// Modeled on absl::Status, reduced to what radixlm needs: a code and a message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace radixlm::core {

enum class StatusCode { kOk = 0, kInvalidArgument, kNotFound, kDataLoss, kOutOfRange,
                        kUnimplemented, kResourceExhausted, kInternal, kIoError };

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "StatusOr built from OK status");
  }
  StatusOr(T value) : v_(std::move(value)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<Status, T> v_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace radixlm::core

// Invariant checks: always on (they guard memory safety in kernels and pools).
#define RADIXLM_CHECK(cond) \
  do { if (!(cond)) ::radixlm::core::CheckFailed(__FILE__, __LINE__, #cond, ""); } while (0)
#define RADIXLM_CHECK_MSG(cond, msg) \
  do { if (!(cond)) ::radixlm::core::CheckFailed(__FILE__, __LINE__, #cond, (msg)); } while (0)

// Propagates a non-OK Status from an expression returning Status.
#define RADIXLM_RETURN_IF_ERROR(expr) \
  do { ::radixlm::core::Status _st = (expr); if (!_st.ok()) return _st; } while (0)

#define RADIXLM_CONCAT_INNER(a, b) a##b
#define RADIXLM_CONCAT(a, b) RADIXLM_CONCAT_INNER(a, b)
// Declares `lhs` from a StatusOr expression or returns its Status.
#define RADIXLM_ASSIGN_OR_RETURN(lhs, expr) \
  RADIXLM_ASSIGN_OR_RETURN_IMPL(RADIXLM_CONCAT(_so_, __LINE__), lhs, expr)
#define RADIXLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
