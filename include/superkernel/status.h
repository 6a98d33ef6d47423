// Error handling convention of superkernel.
//
//  * Anything a user can trigger (a bad graph, option, config file, missing kernel, unsupported
//    combination, a kernel failing at run time) is reported as an `sk::Status` or an
//    `sk::Expected<T>`, with a code and a message naming the op, scope, option or file position
//    at fault. Nothing user-triggerable aborts the process.
//  * A broken internal invariant is a bug: `SK_CHECK(cond) << "context"` aborts with the file,
//    line, condition and message.
//
//   sk::Expected<int> parse_cores(std::string_view s) {
//     if (s.empty()) return sk::Status::invalid_argument("option 'cores': empty value");
//     return 4;
//   }
//   auto cores = parse_cores(text);
//   if (!cores) return cores.status();   // propagate
//   use(*cores);
#ifndef SUPERKERNEL_STATUS_H_
#define SUPERKERNEL_STATUS_H_

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace sk {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad graph, option or input
  kNotFound,         // missing kernel, tensor name, file
  kUnimplemented,    // a recognised feature this build does not support (yet)
  kFailedPrecondition,
  kKernelError,  // a kernel returned an error at run time
  kDeadlock,     // the watchdog found a wait that cannot finish
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status kernel_error(std::string m) { return {StatusCode::kKernelError, std::move(m)}; }
  static Status deadlock(std::string m) { return {StatusCode::kDeadlock, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: op 'mm1' operand 1: ..."
  std::string to_string() const;

  // Adds context in front of the message: "while compiling graph 'g': <message>".
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).is_ok()) v_ = Status::internal("Expected built from an OK status");
  }

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  Status status() const { return has_value() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
// Collects the streamed message of a failed SK_CHECK and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  template <typename V>
  CheckFailure& operator<<(const V& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};
}  // namespace detail

}  // namespace sk

// Internal invariant: aborts with context when `cond` is false. Never for user errors.
#define SK_CHECK(cond) \
  if (cond) {          \
  } else               \
    ::sk::detail::CheckFailure(__FILE__, __LINE__, #cond)

// Returns early from a function returning Status or Expected when `expr` is an error.
#define SK_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::sk::Status sk_status_ = (expr);           \
    if (!sk_status_.is_ok()) return sk_status_; \
  } while (0)

#endif  // SUPERKERNEL_STATUS_H_
