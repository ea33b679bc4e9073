// SPDX-License-Identifier: Apache-2.0
// Errors as values across module boundaries (style rules 12-13).
//
// Result<T> mirrors the std::expected API (has_value, value, error, operator*, operator->) so a
// later switch to C++23 is mechanical. g++ 12 has no std::expected and Debian has no tl-expected.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace colod {

// An error: a std::error_code plus the context that explains it, outermost context first.
class Error {
 public:
  Error() = default;
  Error(std::error_code code, std::string context)
      : code_(code), context_(std::move(context)) {}
  // errno-style constructor: Error(ENOENT, "opening cpu.stat").
  Error(int errno_value, std::string context)
      : code_(errno_value, std::generic_category()), context_(std::move(context)) {}

  [[nodiscard]] const std::error_code& code() const { return code_; }
  [[nodiscard]] int errnoValue() const { return code_.value(); }
  [[nodiscard]] const std::string& context() const { return context_; }

  // Adds outer context: "loading runqlat -- opening map: No such file".
  [[nodiscard]] Error wrap(std::string_view outer) const& {
    return Error(code_, std::string(outer) + " -- " + context_);
  }
  [[nodiscard]] Error wrap(std::string_view outer) && {
    context_.insert(0, std::string(outer) + " -- ");
    return std::move(*this);
  }

  // "context: strerror".
  [[nodiscard]] std::string message() const {
    if (!code_) {
      return context_;
    }
    return context_ + ": " + code_.message();
  }

 private:
  std::error_code code_;
  std::string context_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

template <typename T>
class [[nodiscard]] Result {
 public:
  using value_type = T;

  // Implicit from a value or an Error, like std::expected with std::unexpected.
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  [[nodiscard]] bool has_value() const { return v_.index() == 0; }  // NOLINT
  explicit operator bool() const { return has_value(); }

  T& value() & { return check(), std::get<0>(v_); }
  const T& value() const& { return check(), std::get<0>(v_); }
  T&& value() && { return check(), std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  template <typename U>
  T value_or(U&& fallback) const& {  // NOLINT
    return has_value() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

  [[nodiscard]] const Error& error() const& { return std::get<1>(v_); }
  [[nodiscard]] Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  void check() const {
    if (!has_value()) {
      // Reading the value of a failed Result is a programming error (an invariant).
      std::fprintf(stderr, "colod: value() of failed Result: %s\n",
                   std::get<1>(v_).message().c_str());
      std::abort();
    }
  }
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  [[nodiscard]] bool has_value() const { return ok_; }  // NOLINT
  explicit operator bool() const { return ok_; }
  void value() const {
    if (!ok_) {
      std::fprintf(stderr, "colod: value() of failed Result: %s\n", error_.message().c_str());
      std::abort();
    }
  }
  [[nodiscard]] const Error& error() const& { return error_; }
  [[nodiscard]] Error&& error() && { return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

inline Result<void> ok() { return {}; }

}  // namespace colod

// COLOD_ERR(errno_value, "opening ", path) -> Error with "[file:line] opening <path>".
#define COLOD_ERR(errno_value, ...)                                                   \
  ::colod::Error((errno_value), ::colod::detail::concat("[", __FILE_NAME__, ":", __LINE__, \
                                                        "] ", __VA_ARGS__))

// Propagates a failed Result<T> from the enclosing function, adding context.
#define COLOD_TRY_VOID(expr, ctx)                  \
  do {                                             \
    auto colod_try_r_ = (expr);                    \
    if (!colod_try_r_.has_value()) {               \
      return std::move(colod_try_r_).error().wrap(ctx); \
    }                                              \
  } while (0)
