// Errors are values: every fallible call returns Status or Result<T>, carrying what failed and its context
// (which config, which driver call and its CUresult name, the NVRTC log, where the source was saved).
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace flashjit {

enum class ErrorCode {
  invalid_argument,  // the caller's problem or arguments are wrong
  invalid_config,    // a KernelConfig fails validate()
  unsupported,       // valid, but no kernel supports it (e.g. fa3 on sm_80)
  no_device,         // no driver or no GPU on this machine
  driver,            // a CUDA driver call failed
  compile,           // NVRTC rejected the generated source
  cache,             // the disk cache is unusable (permissions, corruption that could not be repaired)
  not_found,         // precompiled-only mode (FLASHJIT_JIT=0) and the kernel is not in the cache
  io,                // a file could not be read or written
  internal,
};

const char* to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;               // one line: what failed
  std::vector<std::string> context;  // outermost last: "while compiling fa2_bf16_d128_...", ...
  std::string details;               // multi-line payload such as the NVRTC log

  Error() = default;
  Error(ErrorCode c, std::string msg, std::string det = {})
      : code(c), message(std::move(msg)), details(std::move(det)) {}

  // Adds a line of context ("while loading kernel X") and returns the error, for `return e.with(...)`.
  Error&& with(std::string ctx) && {
    context.push_back(std::move(ctx));
    return std::move(*this);
  }
  // Full human-readable text: message, each context line, then the details.
  std::string to_string() const;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), failed_(true) {}  // NOLINT

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_;
  bool failed_ = false;
};

using Status = Result<void>;

}  // namespace flashjit

// Propagates the error of a Status/Result expression out of the current function.
#define FLASHJIT_TRY(expr)                                   \
  do {                                                       \
    auto flashjit_try_r_ = (expr);                           \
    if (!flashjit_try_r_.ok()) return std::move(flashjit_try_r_).error(); \
  } while (0)
