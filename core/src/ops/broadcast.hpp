// Elementwise loops over inputs broadcast together (NumPy/PyTorch rules), for any number of inputs
// and any element types: + - * /, pow and broadcast_to (elementwise.cpp), clamp with tensor bounds
// (unary_math.cpp), comparisons (compare.cpp), maximum/minimum, where and masked_fill (select.cpp).
//
//   const BroadcastPlan<2> plan = make_plan<2>({a.shape(), b.shape()}, out_shape);
//   broadcast_kernel(out.mutable_data<bool>(), plan, [](T x, T y) { return x < y; }, a.data<T>(), b.data<T>());
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "dispatch.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::detail {

// How N inputs are read while the output is written contiguously: dims of the output with the
// element stride of each input in that dim (0 where the input is broadcast). Adjacent dims that
// every input traverses contiguously are merged, so most cases run as one flat inner loop.
template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> sizes;                   // innermost dim last; never empty
  std::array<std::vector<int64_t>, N> strides;  // strides[k][d]: input k's stride in dim d
};

// The element strides of a contiguous tensor of shape `in` read as the (broadcast) shape `out`.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t in_dim = in.size() - 1 - k, out_dim = out.size() - 1 - k;
    strides[out_dim] = in[in_dim] == 1 ? 0 : stride;
    stride *= in[in_dim];
  }
  return strides;
}

// The caller has checked that every input broadcasts to `out` (broadcast_shapes).
template <size_t N>
BroadcastPlan<N> make_plan(const std::array<Shape, N>& inputs, const Shape& out) {
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) full[k] = broadcast_strides(inputs[k], out);
  BroadcastPlan<N> plan;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    const int64_t inner = out[d];
    // Merge into the previous (outer) dim when every input continues contiguously across it.
    bool mergeable = !plan.sizes.empty();
    for (size_t k = 0; k < N && mergeable; ++k) mergeable = plan.strides[k].back() == full[k][d] * inner;
    if (mergeable) {
      plan.sizes.back() *= inner;
      for (size_t k = 0; k < N; ++k) plan.strides[k].back() = full[k][d];
      continue;
    }
    plan.sizes.push_back(inner);
    for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(full[k][d]);
  }
  if (plan.sizes.empty()) {  // every dim has size 1: one element
    plan.sizes = {1};
    for (size_t k = 0; k < N; ++k) plan.strides[k] = {0};
  }
  return plan;
}

namespace broadcast_detail {

// The readers of one inner row: a contiguous run, or one repeated value (held in a register, so the
// loop vectorises even when the compiler cannot rule out aliasing). Inputs are contiguous, so in the
// innermost dim of a plan every input has stride 1 or 0 (broadcast): the dims after it have size 1.
template <typename T>
struct Contiguous {
  const T* data;
  T operator[](int64_t i) const { return data[i]; }
};
template <typename T>
struct Repeated {
  T value;
  T operator[](int64_t) const { return value; }
};

enum class Access { Contiguous, Repeated };

template <Access A, typename T>
auto reader(const T* data) {
  if constexpr (A == Access::Contiguous) return Contiguous<T>{data};
  else return Repeated<T>{*data};
}

// Calls fn.template operator()<A...>() with the access pattern of each input's inner stride: all
// 2^N combinations are instantiated, each a loop the compiler vectorises on its own terms.
template <size_t N, Access... Chosen, typename Fn>
void with_access(const std::array<int64_t, N>& inner_strides, const Fn& fn) {
  if constexpr (sizeof...(Chosen) == N) {
    fn.template operator()<Chosen...>();
  } else {
    if (inner_strides[sizeof...(Chosen)] == 1) with_access<N, Chosen..., Access::Contiguous>(inner_strides, fn);
    else with_access<N, Chosen..., Access::Repeated>(inner_strides, fn);
  }
}

}  // namespace broadcast_detail

// out[i] = op(inputs[i]...) over the output of `plan`, written contiguously; input k is read
// through plan.strides[k]. The flat output is split into fixed chunks of kElementwiseGrain
// elements (independent of the thread count), each walking the rows it overlaps.
template <typename Out, size_t N, typename Op, typename... In>
void broadcast_kernel(Out* out, const BroadcastPlan<N>& plan, const Op& op, const In*... inputs) {
  static_assert(sizeof...(In) == N, "one input pointer per planned input");
  using namespace broadcast_detail;
  const size_t ndim = plan.sizes.size();
  const int64_t inner = plan.sizes.back();
  int64_t numel = inner;
  for (size_t d = 0; d + 1 < ndim; ++d) numel *= plan.sizes[d];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k].back();

  with_access<N>(inner_strides, [&]<Access... A>() {
    parallel_for(numel, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t position = begin; position < end;) {
        // Where this row starts in each input: the outer dims' indices times their strides.
        const int64_t row = position / inner, first = position % inner;
        const int64_t count = std::min(inner - first, end - position);
        std::array<int64_t, N> offsets{};
        for (int64_t d = static_cast<int64_t>(ndim) - 2, rest = row; d >= 0; --d) {
          const int64_t index = rest % plan.sizes[d];
          rest /= plan.sizes[d];
          for (size_t k = 0; k < N; ++k) offsets[k] += index * plan.strides[k][d];
        }
        // One reader per input, positioned at this row's first element (pack order = input order).
        const auto run = [&](auto... readers) {
          Out* destination = out + position;
          for (int64_t i = 0; i < count; ++i) destination[i] = static_cast<Out>(op(readers[i]...));
        };
        [&]<size_t... K>(std::index_sequence<K...>) {
          run(reader<A>(inputs + offsets[K] + first * inner_strides[K])...);
        }(std::make_index_sequence<N>{});
        position += count;
      }
    });
  });
}

// A new tensor of `out_shape` with out[i] = op(inputs[i]...), elements of type Out; input k holds
// elements of type In_k (the caller has checked the dtypes) and broadcasts to `out_shape`:
//   broadcast_map<bool, T, T>(out_shape, [](T x, T y) { return x < y; }, a, b)
template <typename Out, typename... In, typename Op, typename... Tensors>
Tensor broadcast_map(const Shape& out_shape, const Op& op, const Tensors&... inputs) {
  static_assert(sizeof...(In) == sizeof...(Tensors), "one element type per input tensor");
  Tensor out = make_tensor(out_shape, dtype_of<Out>());
  if (out.numel() == 0) return out;
  const auto plan = make_plan<sizeof...(Tensors)>({inputs.shape()...}, out_shape);
  broadcast_kernel(out.mutable_data<Out>(), plan, op, inputs.template data<In>()...);
  return out;
}

// The dtype two operands are brought to before an op combines them, PyTorch's promotion among
// tensors: bool < int64 < bfloat16 < float32 < float64 (torch.promote_types: bfloat16 with float32
// is float32, with int64 or bool bfloat16).
constexpr DType promote_types(DType a, DType b) {
  constexpr auto rank = [](DType dtype) {
    switch (dtype) {
      case DType::Bool: return 0;
      case DType::Int64: return 1;
      case DType::BFloat16: return 2;
      case DType::Float32: return 3;
      case DType::Float64: return 4;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

// The dtype PyTorch computes an op of tensors a and b in (torch.result_type): a 0-d tensor does not
// raise the dtype of a tensor with dims unless its category is higher (bool < integer < floating):
// float32 [3] with a float64 0-d is float32, bfloat16 [3] with a float32 0-d bfloat16, int64 [3]
// with a float64 0-d float64. Operands of the same kind (both 0-d, or both with dims) promote_types.
inline DType result_type(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) == (b.dim() == 0)) return promote_types(a.dtype(), b.dtype());
  const DType dims = a.dim() > 0 ? a.dtype() : b.dtype(), zero_dim = a.dim() > 0 ? b.dtype() : a.dtype();
  const auto category = [](DType dtype) { return dtype == kBool ? 0 : is_floating_point(dtype) ? 2 : 1; };
  return category(zero_dim) > category(dims) ? promote_types(dims, zero_dim) : dims;
}

}  // namespace tg::detail
