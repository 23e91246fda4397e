// What every loss shares: validating its arguments, reducing its per-element terms as the
// Reduction asks (deterministically, in double) and handing each element its share of the
// gradient in backward. Private to nn.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/node.hpp"
#include "deterministic_sum.hpp"
#include "dispatch.hpp"
#include "tapegrad/nn/loss.hpp"
#include "tensor_impl.hpp"

namespace tg::nn::detail {

using tg::detail::for_each_chunk;
using tg::detail::row_chunks;
using tg::detail::RowChunks;

// "none", "mean" or "sum", for error messages.
const char* name(Reduction reduction);

// tg::Error naming `op` unless `tensor` is defined and of a floating dtype; `what` names it.
void check_floating(const char* op, const char* what, const Tensor& tensor);
// tg::Error naming `op` unless `other` has `input`'s dtype.
void check_same_dtype(const char* op, const char* what, const Tensor& input, const Tensor& other);
// tg::Error naming `op` when a weight requires grad: weights are constants, as in PyTorch.
void check_constant(const char* op, const char* what, const Tensor& weight);
// tg::Error naming `op` and both shapes unless `target` has `input`'s shape.
void check_same_shape(const char* op, const Tensor& input, const Tensor& target);

// An optional argument (a weight) saved for backward, and unpacked there: undefined when absent.
inline std::optional<autograd::SavedTensor> save_if_defined(const Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return autograd::SavedTensor(tensor);
}
inline Tensor unpack_if_saved(const autograd::GradInputs& grads, const std::optional<autograd::SavedTensor>& saved) {
  return saved ? grads.unpack(*saved) : Tensor();
}

// slots: [count, width], one row of partial sums per chunk -> the column sums, chunks added in order.
std::vector<double> sum_slots(const std::vector<double>& slots, int64_t count, int64_t width);

// The sum over [0, n) of chunk_sum(i0, i1), the sums of chunks fixed by n, added in chunk order:
// bitwise the same at any thread count.
template <typename ChunkSum>
double ordered_chunk_sum(int64_t n, const ChunkSum& chunk_sum) {
  const RowChunks chunks = row_chunks(n, 1);
  std::vector<double> partial(static_cast<size_t>(chunks.count), 0.0);
  for_each_chunk(chunks, n, [&](int64_t chunk, int64_t i0, int64_t i1) {
    partial[static_cast<size_t>(chunk)] = chunk_sum(i0, i1);
  });
  return sum_slots(partial, chunks.count, 1)[0];
}

// Σ term(i) over [0, n) in double, each chunk in lane_sum's order.
template <typename Term>
double ordered_sum(int64_t n, const Term& term) {
  return ordered_chunk_sum(n, [&](int64_t i0, int64_t i1) {
    return tg::detail::lane_sum(i1 - i0, [&](int64_t i) { return term(i0 + i); });
  });
}

// out: [n] of T, out[i] = value(i), in parallel.
template <typename T, typename Value>
void fill_elements(T* out, int64_t n, const Value& value) {
  tg::detail::parallel_for(n, tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<T>(value(i));
  });
}

// The n terms term(i) reduced: a tensor of `shape` holding them (None), their sum (Sum) or their
// sum / n (Mean: NaN for n = 0, as in PyTorch); 0-d unless None.
template <typename T, typename Term>
Tensor reduce_terms(const Shape& shape, DType dtype, Reduction reduction, const Term& term) {
  const int64_t n = checked_numel(shape, "loss");
  if (reduction == Reduction::None) {
    Tensor out = make_tensor(shape, dtype);
    fill_elements(out.mutable_data<T>(), n, term);
    return out;
  }
  const double sum = ordered_sum(n, term);
  return scalar_tensor(reduction == Reduction::Sum ? sum : sum / static_cast<double>(n), dtype);
}

// The gradient reaching term i of a loss in backward: grad_output[i] under None, grad_output ·
// scale otherwise (scale = 1/n for a mean over n terms, 1 for a sum).
template <typename T>
struct Upstream {
  const T* per_term = nullptr;  // grad_output's values under None
  double scalar = 0.0;          // grad_output · scale otherwise
  double operator()(int64_t i) const { return per_term ? static_cast<double>(per_term[i]) : scalar; }
};

template <typename T>
Upstream<T> upstream(const Tensor& grad_output, Reduction reduction, double mean_scale) {
  if (reduction == Reduction::None) return {grad_output.data<T>(), 0.0};
  return {nullptr, grad_output.item() * (reduction == Reduction::Mean ? mean_scale : 1.0)};
}

// The same upstream gradient as a tensor, for a backward pass that is itself differentiated
// (create_graph): grad_output under None (one per term), grad_output · mean_scale (0-d) under Mean,
// grad_output under Sum; it multiplies the slopes as a recorded product.
inline Tensor upstream_tensor(const Tensor& grad_output, Reduction reduction, double mean_scale) {
  return reduction == Reduction::Mean ? grad_output * mean_scale : grad_output;
}

}  // namespace tg::nn::detail
