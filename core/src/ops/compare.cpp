// Comparisons eq, ne, lt, le, gt, ge (and == != < <= > >=) to bool tensors, with broadcasting, for
// every dtype. Not differentiable: the result is a constant of the tape, as in PyTorch.
//
// Operands of different dtypes are first promoted (bool < int64 < bfloat16 < float32 < float64; a 0-d
// operand raises only the category, as torch.result_type: detail::result_type). A scalar is
// rounded to a float tensor's dtype before comparing (PyTorch: float32 x == 0.1 is true where
// x holds 0.1f); against int64 and bool tensors an integral scalar compares exactly as int64 and
// any other scalar in float64 (PyTorch would use float32 there, which only differs past 2^24).
#include <cmath>
#include <functional>

#include "autograd/node.hpp"
#include "ops/broadcast.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace {

template <typename Compare>
Tensor compare(const Tensor& a, const Tensor& b, const char* op) try {
  check(a.defined() && b.defined(), op, "undefined tensor operand");
  const DType common = detail::result_type(a, b);
  NoGradGuard no_grad;  // the promoting copies are not recorded either
  const Tensor lhs = a.to(common), rhs = b.to(common);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  return detail::dispatch_all(op, common, [&]<typename T>() {
    return detail::broadcast_map<bool, T, T>(out_shape, [](T x, T y) { return Compare{}(x, y); }, lhs, rhs);
  });
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

// The scalar as a 0-d tensor that compares the way the header comment says.
Tensor scalar_operand(const Tensor& a, double value) {
  if (a.defined() && is_floating_point(a.dtype())) return scalar_tensor(value, a.dtype());
  const bool integral = std::trunc(value) == value && value >= -0x1p63 && value < 0x1p63;
  return scalar_tensor(value, integral ? kInt64 : kFloat64);
}

template <typename Compare>
Tensor compare(const Tensor& a, double b, const char* op) try {
  return compare<Compare>(a, scalar_operand(a, b), op);
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

}  // namespace

Tensor Tensor::eq(const Tensor& other) const { return compare<std::equal_to<>>(*this, other, "eq"); }
Tensor Tensor::ne(const Tensor& other) const { return compare<std::not_equal_to<>>(*this, other, "ne"); }
Tensor Tensor::lt(const Tensor& other) const { return compare<std::less<>>(*this, other, "lt"); }
Tensor Tensor::le(const Tensor& other) const { return compare<std::less_equal<>>(*this, other, "le"); }
Tensor Tensor::gt(const Tensor& other) const { return compare<std::greater<>>(*this, other, "gt"); }
Tensor Tensor::ge(const Tensor& other) const { return compare<std::greater_equal<>>(*this, other, "ge"); }
Tensor Tensor::eq(double other) const { return compare<std::equal_to<>>(*this, other, "eq"); }
Tensor Tensor::ne(double other) const { return compare<std::not_equal_to<>>(*this, other, "ne"); }
Tensor Tensor::lt(double other) const { return compare<std::less<>>(*this, other, "lt"); }
Tensor Tensor::le(double other) const { return compare<std::less_equal<>>(*this, other, "le"); }
Tensor Tensor::gt(double other) const { return compare<std::greater<>>(*this, other, "gt"); }
Tensor Tensor::ge(double other) const { return compare<std::greater_equal<>>(*this, other, "ge"); }

Tensor eq(const Tensor& a, const Tensor& b) { return a.eq(b); }
Tensor ne(const Tensor& a, const Tensor& b) { return a.ne(b); }
Tensor lt(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor le(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor gt(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor ge(const Tensor& a, const Tensor& b) { return a.ge(b); }

Tensor operator==(const Tensor& a, const Tensor& b) { return a.eq(b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return a.ne(b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator==(const Tensor& a, double b) { return a.eq(b); }
Tensor operator!=(const Tensor& a, double b) { return a.ne(b); }
Tensor operator<(const Tensor& a, double b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, double b) { return a.le(b); }
Tensor operator>(const Tensor& a, double b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, double b) { return a.ge(b); }
// A scalar on the left is the mirrored comparison: 0.5 < x is x > 0.5.
Tensor operator==(double a, const Tensor& b) { return b.eq(a); }
Tensor operator!=(double a, const Tensor& b) { return b.ne(a); }
Tensor operator<(double a, const Tensor& b) { return b.gt(a); }
Tensor operator<=(double a, const Tensor& b) { return b.ge(a); }
Tensor operator>(double a, const Tensor& b) { return b.lt(a); }
Tensor operator>=(double a, const Tensor& b) { return b.le(a); }

}  // namespace tg
