// Runs a generic lambda for the C++ element type behind a runtime dtype, for the dtypes an op's
// kernels are written for, and throws tg::Error naming the op and the dtype for the others:
//
//   dispatch_floating("exp", x.dtype(), [&]<typename T>() { kernel<T>(x.data<T>(), ...); });
//   dispatch_all("transpose", x.dtype(), [&]<typename T>() { copy<T>(...); });
//
// The switch lists every dtype, so the lambda is instantiated only for the supported ones and a
// new dtype cannot slip into an old kernel (the static_assert fails until it is listed here).
//
// bfloat16 is in AllDTypes (moving, converting, printing) and not in FloatingDTypes: an op computes
// bfloat16 through its float32 kernel (bfloat16_compute.hpp), so no arithmetic kernel is ever
// instantiated for it, and an op that does not do that refuses it here, naming the cast to float32.
#pragma once

#include <iterator>
#include <ostream>
#include <string>
#include <utility>

#include "tapegrad/dtype.hpp"
#include "tapegrad/error.hpp"

namespace tg::detail {

// The dtypes an op supports.
template <DType... Supported>
struct DTypes {
  static constexpr bool contains(DType dtype) { return ((dtype == Supported) || ...); }
  static std::string names() {
    std::string list;
    ((list += (list.empty() ? "" : ", ") + std::string(name(Supported))), ...);
    return list;
  }
};
using FloatingDTypes = DTypes<kFloat32, kFloat64>;
using AllDTypes = DTypes<kFloat32, kFloat64, kBFloat16, kInt64, kBool>;

// The dtype constant a user writes: "tg::kFloat32", "tg::kBFloat16".
inline std::string constant_name(DType dtype) {
  if (dtype == kBFloat16) return "tg::kBFloat16";
  std::string dtype_name(name(dtype));
  dtype_name[0] = static_cast<char>(dtype_name[0] - 'a' + 'A');
  return "tg::k" + dtype_name;
}

// The dtype a refused tensor is best cast to: the nearest supported one up the promotion order
// bool < int64 < float32 < float64 (a bool tensor of an int64 op becomes int64, an int64 tensor
// of a float op float32), or failing that the nearest one down (float64 to float32). bfloat16 moves
// up from between int64 and float32 (to float32), and is the advice only for an op that takes no
// other float dtype: a storage type that loses bits is never where an int64 tensor is sent.
template <typename Supported>
constexpr DType cast_target(DType refused) {
  constexpr DType order[] = {kBool, kInt64, kFloat32, kFloat64};
  constexpr int count = static_cast<int>(std::size(order));
  static_assert(count + 1 == kDTypeCount, "a dtype was added: place it in the order above");
  const DType from = refused == kBFloat16 ? kInt64 : refused;
  int at = 0;
  while (order[at] != from) ++at;
  for (int up = at + 1; up < count; ++up)
    if (Supported::contains(order[up])) return order[up];
  for (int down = (refused == kBFloat16 ? at + 1 : at) - 1; down >= 0; --down)
    if (Supported::contains(order[down])) return order[down];
  if (Supported::contains(kBFloat16)) return kBFloat16;
  return refused;  // an op that supports no dtype: not one that exists
}

// "; cast with .to(tg::kFloat32)": the fix a dtype refusal names, as a message part for check()
// (built only when the message is: a passing check stays one compare).
struct CastAdvice {
  DType target;
};
inline std::ostream& operator<<(std::ostream& out, CastAdvice advice) {
  return out << "; cast with .to(" << constant_name(advice.target) << ")";
}
template <typename Supported>
constexpr CastAdvice cast_advice(DType refused) {
  return {cast_target<Supported>(refused)};
}

// The one refusal of a tensor's dtype: names the op, the dtype, what it supports and the cast.
template <typename Supported>
[[noreturn]] void throw_unsupported_dtype(const char* op, DType dtype) {
  throw Error(concat(op, ": not implemented for ", dtype, " tensors (supported: ", Supported::names(), ")",
                     cast_advice<Supported>(dtype)));
}

// tg::Error naming `op` unless `dtype` is one of `Supported`: for validating at an op's edge,
// before a kernel deep inside dispatches.
template <typename Supported>
void check_dtype(const char* op, DType dtype) {
  if (!Supported::contains(dtype)) throw_unsupported_dtype<Supported>(op, dtype);
}

// The same for a dtype passed as an argument (tg::randint's, an option's): there is no tensor to
// cast yet, so the message names the dtype to pass instead.
template <typename Supported>
void check_dtype_argument(const char* op, DType dtype) {
  if (!Supported::contains(dtype))
    throw Error(concat(op, ": not implemented for dtype ", dtype, " (supported: ", Supported::names(), "); pass ",
                       constant_name(cast_target<Supported>(dtype)), " instead"));
}

template <typename Supported, typename Fn>
decltype(auto) dispatch(const char* op, DType dtype, Fn&& fn) {
  static_assert(kDTypeCount == 5, "a dtype was added: list it in the switch below");
  switch (dtype) {
    case DType::Float32:
      if constexpr (Supported::contains(DType::Float32)) return fn.template operator()<float>();
      break;
    case DType::Float64:
      if constexpr (Supported::contains(DType::Float64)) return fn.template operator()<double>();
      break;
    case DType::Int64:
      if constexpr (Supported::contains(DType::Int64)) return fn.template operator()<int64_t>();
      break;
    case DType::Bool:
      if constexpr (Supported::contains(DType::Bool)) return fn.template operator()<bool>();
      break;
    case DType::BFloat16:
      if constexpr (Supported::contains(DType::BFloat16)) return fn.template operator()<BFloat16>();
      break;
  }
  throw_unsupported_dtype<Supported>(op, dtype);
}

// Arithmetic, reductions, matmul, the fused nn kernels, random fills and everything autograd touches.
template <typename Fn>
decltype(auto) dispatch_floating(const char* op, DType dtype, Fn&& fn) {
  return dispatch<FloatingDTypes>(op, dtype, std::forward<Fn>(fn));
}

// Ops that only move, convert or print values: creation, .to, item, copies, transpose, I/O.
template <typename Fn>
decltype(auto) dispatch_all(const char* op, DType dtype, Fn&& fn) {
  return dispatch<AllDTypes>(op, dtype, std::forward<Fn>(fn));
}

}  // namespace tg::detail
