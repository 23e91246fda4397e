// The argument checks and the ordered slot sums every loss shares (loss_reduction.hpp).
#include "loss_reduction.hpp"

namespace tg::nn::detail {

const char* name(Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  return "?";
}

void check_floating(const char* op, const char* what, const Tensor& tensor) {
  check(tensor.defined(), op, "undefined ", what);
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(op, tensor.dtype());
}

void check_same_dtype(const char* op, const char* what, const Tensor& input, const Tensor& other) {
  check(other.dtype() == input.dtype(), op, "expected ", what, " of input's dtype ", input.dtype(), ", got ",
        other.dtype());
}

void check_constant(const char* op, const char* what, const Tensor& weight) {
  check(!weight.requires_grad(), op, "the ", what, " is a constant: no gradient flows to it, so it must not require grad");
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  check(input.shape() == target.shape(), op, "expected input and target of the same shape, got ", input.shape(),
        " and ", target.shape(), " (tapegrad does not broadcast a loss's target)");
}

std::vector<double> sum_slots(const std::vector<double>& slots, int64_t count, int64_t width) {
  std::vector<double> totals(static_cast<size_t>(width), 0.0);
  tg::detail::sum_slots_in_order(slots.data(), count, width,
                                 [&](int64_t j, double sum) { totals[static_cast<size_t>(j)] = sum; });
  return totals;
}

}  // namespace tg::nn::detail
