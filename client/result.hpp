#pragma once
// The client's errors are values: result<T> holds a T or an error (a code and
// a message saying what was refused and why). The client library builds
// without CAF, so it has its own small type rather than caf::expected.

#include <string>
#include <utility>
#include <variant>

namespace kvtier::client {

enum class errc : int {
  ok = 0,
  unreachable = 1,    // no daemon at the endpoint
  refused = 2,        // wrong tenant or token, or a limit of the daemon
  protocol = 3,       // a frame the other side could not read (version, size, op)
  bad_request = 4,    // an argument the daemon refused (offset out of the region, reserved key)
  quota_exceeded = 5, // the tenant's quota would be exceeded
  closed = 6,         // the connection is gone (timeout, daemon exit)
  system = 7,         // an OS call failed (memfd, mmap, socket)
  internal = 8,       // the daemon failed (its tier I/O)
};

const char* to_string(errc code);

struct error {
  errc code = errc::ok;
  std::string message;
  /// "quota_exceeded: tenant a holds 100 of 100 blocks"
  std::string what() const { return std::string(to_string(code)) + ": " + message; }
};

template <class T>
class result {
public:
  result(T value) : v_(std::move(value)) {}
  result(error e) : v_(std::move(e)) {}
  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const error& err() const { return std::get<1>(v_); }

private:
  std::variant<T, error> v_;
};

template <>
class result<void> {
public:
  result() = default;
  result(error e) : e_(std::move(e)) {}
  bool has_value() const { return e_.code == errc::ok; }
  explicit operator bool() const { return has_value(); }
  const error& err() const { return e_; }

private:
  error e_;
};

} // namespace kvtier::client
