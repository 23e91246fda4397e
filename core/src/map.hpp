// The elementwise loops below every op: out[i] = fn(x[i]) and out[i] = fn(a[i], b[i]) over
// contiguous float32/float64 tensors of one shape, in fixed chunks (parallel_for), not recorded on
// the tape. The ops (ops/), the tape's gradient accumulation (autograd/engine.cpp) and the kernels'
// backward passes build on them; this header includes nothing from ops/. Private to the library.
#pragma once

#include <cstdint>

#include "dispatch.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::detail {

// out[i] = fn(x[i]) over a contiguous tensor; not recorded.
template <typename Fn>
Tensor map(const Tensor& x, const Fn& fn) {
  Tensor out = make_tensor(x.shape(), x.dtype());
  dispatch_floating("map", x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* result = out.mutable_data<T>();
    parallel_for(x.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) result[i] = fn(in[i]);
    });
  });
  return out;
}

// out[i] = fn(a[i], b[i]) for two tensors of the same shape and dtype; not recorded.
template <typename Fn>
Tensor map2(const Tensor& a, const Tensor& b, const Fn& fn) {
  Tensor out = make_tensor(a.shape(), a.dtype());
  dispatch_floating("map2", a.dtype(), [&]<typename T>() {
    const T* lhs = a.data<T>();
    const T* rhs = b.data<T>();
    T* result = out.mutable_data<T>();
    parallel_for(a.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) result[i] = fn(lhs[i], rhs[i]);
    });
  });
  return out;
}

// a + b for tensors whose shape and dtype the caller has checked; not recorded. The tape adds the
// gradients arriving at one node with it, bfloat16 ones too.
inline Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  if (a.dtype() == kBFloat16) {  // PyTorch's bfloat16 add: each sum in float32, rounded once
    Tensor out = make_tensor(a.shape(), kBFloat16);
    const BFloat16 *lhs = a.data<BFloat16>(), *rhs = b.data<BFloat16>();
    BFloat16* result = out.mutable_data<BFloat16>();
    parallel_for(a.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) result[i] = static_cast<float>(lhs[i]) + static_cast<float>(rhs[i]);
    });
    return out;
  }
  return map2(a, b, [](auto x, auto y) { return x + y; });
}

}  // namespace tg::detail
