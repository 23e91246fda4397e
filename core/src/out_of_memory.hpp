// Running out of memory inside a public op: a tg::Error that names the op the user called and,
// where known, the bytes that could not be had.
//
// Tensor storage reports itself with its bytes (make_tensor throws OutOfMemoryError). Every other
// allocation of an op (shape vectors, views, saved tensors, the backward closure, the tape node)
// happens at many places inside the op, some of them before autograd::record runs (a closure's
// captures are built at the call site); so the conversion sits once at the op's public edge, as a
// function-try-block whose handler hands the exception to rethrow_out_of_memory_as:
//
//   Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) try {
//     ...
//   } catch (...) {
//     tg::detail::rethrow_out_of_memory_as("linear");
//   }
//
// The outermost op names the failure, so `var` says "var:" even when the subtraction or the
// tensor it makes inside ran out. A failed op leaves nothing half-built behind (its output and
// node were locals), so the next call can succeed.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "tapegrad/error.hpp"

namespace tg::detail {

// "<op>: <what failed>", e.g. "sum: cannot allocate 4096 bytes for a float32 tensor of shape [1024]".
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const char* op, std::string what_failed)
      : Error(concat(op, ": ", what_failed)), what_failed_(std::move(what_failed)) {}
  const std::string& what_failed() const { return what_failed_; }

 private:
  std::string what_failed_;  // the message without the op, for an enclosing op to rename it
};

// Only in a catch handler: rethrows the exception being handled, std::bad_alloc and an inner
// op's OutOfMemoryError as an OutOfMemoryError naming `op`, anything else unchanged.
[[noreturn]] inline void rethrow_out_of_memory_as(const char* op) {
  try {
    throw;
  } catch (const OutOfMemoryError& inner) {
    throw OutOfMemoryError(op, inner.what_failed());
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(op, "out of memory");
  }
}

}  // namespace tg::detail
