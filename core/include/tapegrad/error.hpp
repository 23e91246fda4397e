/// @file
/// tg::Error — the one exception type tapegrad throws for invalid use.
///
/// Every public function validates its arguments at the edge and throws tg::Error with a message
/// that names the operation and the offending shapes, dims or dtypes ("expected X, got Y").
/// Kernels behind that edge trust their input.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tg {

/// The exception tapegrad throws for invalid use; what() names the operation and the offending values.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline void append(std::ostringstream& out, const std::vector<int64_t>& shape) {
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
}
template <typename T>
void append(std::ostringstream& out, const T& value) {
  out << value;
}

// Concatenates the streamable pieces of a message; shapes print as [2, 3].
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (append(out, parts), ...);
  return out.str();
}

// Throws tg::Error("<op>: <message pieces>"). Out of line and cold, so that a passing check
// inlines to one test and branch (checks sit in every accessor; a small training step runs
// thousands of them).
template <typename... Parts>
[[noreturn, gnu::cold, gnu::noinline]] void fail(const char* op, const Parts&... parts) {
  throw Error(concat(op, ": ", parts...));
}

}  // namespace detail

/// Throws `tg::Error("<op>: <message pieces>")` when `condition` is false.
template <typename... Parts>
void check(bool condition, const char* op, const Parts&... parts) {
  if (!condition) [[unlikely]] detail::fail(op, parts...);
}

}  // namespace tg
