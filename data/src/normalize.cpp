// Standardising a data set in place (data/normalize.hpp).
#include "tapegrad/data/normalize.hpp"

#include <cmath>
#include <algorithm>
#include <vector>

#include "deterministic_sum.hpp"
#include "dispatch.hpp"
#include "parallel_for.hpp"
#include "tapegrad/autograd.hpp"
#include "tensor_impl.hpp"

namespace tg::data {

namespace {

// Elements per chunk of a sum: each chunk's partial sum has a slot of its own, and the slots are
// added in chunk order, so the result depends on the element count alone.
constexpr int64_t kSumChunk = 1 << 16;

// Σ term(i) over [0, n) in double, in chunks of kSumChunk run in parallel.
template <typename Term>
double chunked_sum(int64_t n, const Term& term) {
  std::vector<double> slots(static_cast<size_t>(detail::ceil_div(n, kSumChunk)), 0.0);
  detail::parallel_for(n, kSumChunk, [&](int64_t begin, int64_t end) {
    slots[static_cast<size_t>(begin / kSumChunk)] =
        detail::lane_sum(end - begin, [&](int64_t i) { return term(begin + i); });
  });
  double total = 0.0;
  for (const double slot : slots) total += slot;
  return total;
}

void check_floating(const Tensor& x, const char* op) {
  check(x.defined(), op, "called on an undefined tensor");
  detail::check_dtype<detail::FloatingDTypes>(op, x.dtype());
}

}  // namespace

Moments moments(const Tensor& x) {
  check_floating(x, "moments");
  const int64_t n = x.numel();
  return detail::dispatch_floating("moments", x.dtype(), [&]<typename T>() {
    const T* values = x.data<T>();
    // 0 / 0 is NaN for no elements, as torch's mean; and max(n - 1, 0) = 0 makes the std of one
    // element NaN, as torch's.
    const double mean = chunked_sum(n, [&](int64_t i) { return static_cast<double>(values[i]); }) /
                        static_cast<double>(n);
    const double squares = chunked_sum(n, [&](int64_t i) {
      const double deviation = static_cast<double>(values[i]) - mean;
      return deviation * deviation;
    });
    return Moments{.mean = mean, .stddev = std::sqrt(squares / static_cast<double>(std::max<int64_t>(n - 1, 0)))};
  });
}

Tensor& normalize_(Tensor& x, double mean, double stddev) {
  check_floating(x, "normalize_");
  check(!(is_grad_enabled() && x.requires_grad()), "normalize_", "a tensor that requires grad (shape ", x.shape(),
        ") cannot be modified in place while grad mode is on; use a tg::NoGradGuard");
  check(std::isfinite(mean), "normalize_", "expected a finite mean, got ", mean);
  check(std::isfinite(stddev), "normalize_", "expected a finite stddev, got ", stddev);
  detail::dispatch_floating("normalize_", x.dtype(), [&]<typename T>() {
    const T shift = static_cast<T>(mean), scale = static_cast<T>(stddev);
    check(scale != 0, "normalize_", "stddev ", stddev, " is 0 in ", x.dtype(), ": every element would be divided by zero");
    check(std::isfinite(shift) && std::isfinite(scale), "normalize_", "mean ", mean, " or stddev ", stddev,
          " overflows ", x.dtype());
    T* values = x.mutable_data<T>();
    // Elements are independent: any chunking gives the same bits.
    detail::parallel_for(x.numel(), detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) values[i] = (values[i] - shift) / scale;
    });
  });
  detail::bump_version(x);  // a backward that saved x before this write must refuse it
  return x;
}

}  // namespace tg::data
