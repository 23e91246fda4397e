// Running out of memory inside a public op: std::bad_alloc becomes a tg::Error naming the op.
//
// Tensor storage reports itself, with the bytes it wanted (make_tensor). Every other allocation of
// an op (shape vectors, views, saved tensors, the closure and the tape node) happens at many places
// inside the op, some of them before autograd::record runs (a closure's captures are built at the
// call site); so the conversion sits once at the op's public edge, as a function-try-block:
//
//   Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) try {
//     ...
//   } catch (const std::bad_alloc&) {
//     detail::throw_out_of_memory("linear");
//   }
//
// Only std::bad_alloc is caught: a tg::Error from inside (a failed check, make_tensor's message
// with the bytes) passes through unchanged. A failed op leaves nothing half-built behind (its
// output and node were locals), so the next call can succeed.
#pragma once

#include "tapegrad/error.hpp"

namespace tg::detail {

[[noreturn]] inline void throw_out_of_memory(const char* op) { throw Error(concat(op, ": out of memory")); }

}  // namespace tg::detail
