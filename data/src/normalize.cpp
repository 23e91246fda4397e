// Standardising a data set in place (data/normalize.hpp).
#include "tapegrad/data/normalize.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
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

// --- moments along dims --------------------------------------------------------------------------
//
// A contiguous x is walked as runs of adjacent dims that are all kept or all reduced (dims of size
// 1 dropped, neighbours of one kind merged): [N, F] reduced over {0} is R(N) K(F); [N, C, H, W]
// over {0, 2, 3} is R(N) K(C) R(H·W). The last run is contiguous. One work item computes a set of
// results: one position of the outer kept runs, and, when the last run is kept, a block of up to
// kColumnBlock of its positions, read a row segment at a time. Each item adds its elements in
// row-major order, on one thread, so the results do not depend on how items are spread.

constexpr int64_t kColumnBlock = 256;

struct Run {
  int64_t size;
  int64_t stride;  // elements between consecutive positions of the run in x
};

struct ReductionLayout {
  std::vector<Run> kept_outer;     // kept runs but the last, outermost first
  std::vector<Run> reduced_outer;  // reduced runs but the last
  int64_t inner = 1;               // the last run's size (its stride is 1)
  bool inner_kept = true;
  int64_t per_result = 1;          // elements behind each result: the reduced runs' sizes multiplied
  int64_t results = 1;             // the kept runs' sizes multiplied
  Shape out_shape;                 // x's shape with the reduced dims removed, or set to 1 (keepdim)
};

ReductionLayout layout_of(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  const auto ndim = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), dims.empty());  // no dims: every dim, as torch
  for (const int64_t dim : dims) {
    if (ndim == 0) {  // a 0-d tensor reduces over "dim 0" or "-1" to itself, as torch's
      normalize_dim(dim, 1, op);
      continue;
    }
    const int64_t d = normalize_dim(dim, ndim, op);
    check(!reduced[static_cast<size_t>(d)], op, "dim ", dim, " appears more than once in the list of dims for a tensor of shape ",
          shape);
    reduced[static_cast<size_t>(d)] = true;
  }
  ReductionLayout layout;
  std::vector<std::pair<Run, bool>> runs;  // (run, kept)
  int64_t stride = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {  // innermost first, to know the strides
    const int64_t size = shape[static_cast<size_t>(d)];
    const bool kept = !reduced[static_cast<size_t>(d)];
    (kept ? layout.results : layout.per_result) *= size;
    if (size != 1) {
      if (!runs.empty() && runs.back().second == kept) runs.back().first.size *= size;
      else runs.push_back({Run{size, stride}, kept});
    }
    stride *= size;
  }
  for (int64_t d = 0; d < ndim; ++d)
    if (!reduced[static_cast<size_t>(d)] || keepdim)
      layout.out_shape.push_back(reduced[static_cast<size_t>(d)] ? 1 : shape[static_cast<size_t>(d)]);
  if (runs.empty()) return layout;  // one element: inner kept, of size 1
  layout.inner = runs.front().first.size;
  layout.inner_kept = runs.front().second;
  for (size_t k = runs.size(); k-- > 1;) (runs[k].second ? layout.kept_outer : layout.reduced_outer).push_back(runs[k].first);
  return layout;
}

int64_t blocks_of(const ReductionLayout& layout) {
  return layout.inner_kept ? detail::ceil_div(layout.inner, kColumnBlock) : 1;
}

// A work item: its results are result, result + 1, ..., result + count - 1 when the last run is
// kept (count of them), and `result` alone when it is reduced (then `count` elements of each
// segment add to it). `base` is the offset in x of its first segment's first element but for the
// reduced outer runs' part.
struct Item {
  int64_t base;
  int64_t result;
  int64_t count;
};

Item item_of(const ReductionLayout& layout, int64_t item) {
  const int64_t blocks = blocks_of(layout);
  const int64_t outer = item / blocks;
  const int64_t first = layout.inner_kept ? item % blocks * kColumnBlock : 0;
  int64_t base = first;
  for (int64_t k = static_cast<int64_t>(layout.kept_outer.size()) - 1, rest = outer; k >= 0; --k) {
    const Run& run = layout.kept_outer[static_cast<size_t>(k)];
    base += rest % run.size * run.stride;
    rest /= run.size;
  }
  return {.base = base,
          .result = outer * (layout.inner_kept ? layout.inner : 1) + first,
          .count = layout.inner_kept ? std::min(kColumnBlock, layout.inner - first) : layout.inner};
}

// Calls visit(offset) for the first element of every row segment of `item`, in row-major order:
// one per position of the reduced outer runs.
template <typename Visit>
void for_each_segment(const ReductionLayout& layout, const Item& item, const Visit& visit) {
  int64_t segments = 1;
  for (const Run& run : layout.reduced_outer) segments *= run.size;
  for (int64_t segment = 0; segment < segments; ++segment) {
    int64_t offset = item.base;
    for (int64_t k = static_cast<int64_t>(layout.reduced_outer.size()) - 1, rest = segment; k >= 0; --k) {
      const Run& run = layout.reduced_outer[static_cast<size_t>(k)];
      offset += rest % run.size * run.stride;
      rest /= run.size;
    }
    visit(offset);
  }
}

// sums[r] = Σ term(x_i, r) over the elements x_i behind each result r, in double.
template <typename T, typename Term>
void sum_per_result(const ReductionLayout& layout, const T* values, const Term& term, std::vector<double>& sums) {
  if (layout.results == 0) return;
  const int64_t items = layout.results / (layout.inner_kept ? layout.inner : 1) * blocks_of(layout);
  const int64_t per_item = std::max<int64_t>(1, layout.per_result * std::min(kColumnBlock, layout.inner));
  detail::parallel_for(items, std::max<int64_t>(1, detail::kElementwiseGrain / per_item), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Item item = item_of(layout, i);
      double block[kColumnBlock] = {};  // the item's running sums
      for_each_segment(layout, item, [&](int64_t offset) {
        const T* segment = values + offset;
        if (layout.inner_kept)
          for (int64_t j = 0; j < item.count; ++j) block[j] += term(segment[j], item.result + j);
        else
          for (int64_t j = 0; j < item.count; ++j) block[0] += term(segment[j], item.result);
      });
      const int64_t written = layout.inner_kept ? item.count : 1;
      std::copy(block, block + written, sums.begin() + item.result);
    }
  });
}

// The mean of all n elements of x and Σ (x - mean)², in parallel chunks. 0 / 0 is NaN for no
// elements, as torch's mean.
struct CentredSums {
  double mean;
  double squares;
};

template <typename T>
CentredSums centred_sums(const T* values, int64_t n) {
  const double mean = chunked_sum(n, [&](int64_t i) { return static_cast<double>(values[i]); }) / static_cast<double>(n);
  const double squares = chunked_sum(n, [&](int64_t i) {
    const double deviation = static_cast<double>(values[i]) - mean;
    return deviation * deviation;
  });
  return {mean, squares};
}

// --- normalize_ with broadcast mean and stddev ---------------------------------------------------

// Where a tensor that broadcasts to x's shape keeps the value of each element of x. x is walked a
// row (its last dim) at a time: `strides` has one entry per dim of x, 0 where the tensor has
// size 1 or lacks the dim, so the offset of x's element (i_0, ..., i_last) is Σ i_d · strides[d].
struct BroadcastOffsets {
  std::vector<int64_t> strides;

  BroadcastOffsets(const Shape& shape, const Shape& x_shape) : strides(x_shape.size(), 0) {
    const size_t lead = x_shape.size() - shape.size();
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] != 1) strides[lead + d] = stride;
      stride *= shape[d];
    }
  }
  // The offset of the first element of x's row `row` (all dims but the last).
  int64_t row_offset(int64_t row, const Shape& x_shape) const {
    int64_t offset = 0;
    for (size_t d = x_shape.empty() ? 0 : x_shape.size() - 1; d-- > 0;) {
      offset += row % x_shape[d] * strides[d];
      row /= x_shape[d];
    }
    return offset;
  }
  int64_t column_stride() const { return strides.empty() ? 0 : strides.back(); }
};

// "[2, 0]": the position of element `flat` of a row-major tensor of `shape`.
std::string index_text(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

// `values` (mean or stddev) checked and rounded to T: its shape broadcasts to x's, every element is
// finite in T, and a stddev has no 0.
template <typename T>
std::vector<T> checked_values(const Tensor& values, const char* name, const Tensor& x) {
  check(values.defined(), "normalize_", "the ", name, " is an undefined tensor");
  detail::check_dtype<detail::FloatingDTypes>("normalize_", values.dtype());
  const Shape& shape = values.shape();
  bool broadcasts = shape.size() <= x.shape().size();
  for (size_t d = 0; broadcasts && d < shape.size(); ++d)
    broadcasts = shape[d] == 1 || shape[d] == x.shape()[x.shape().size() - shape.size() + d];
  check(broadcasts, "normalize_", "a ", name, " of shape ", shape, " does not broadcast to x's shape ", x.shape(),
        " (expected, e.g., the shape moments(x, dims) gives)");
  const std::vector<double> given = values.to(kFloat64).to_vector<double>();
  std::vector<T> rounded(given.size());
  const bool is_stddev = std::string_view(name) == "stddev";
  for (size_t i = 0; i < given.size(); ++i) {
    rounded[i] = static_cast<T>(given[i]);
    check(std::isfinite(rounded[i]), "normalize_", "the ", name, " at ", index_text(static_cast<int64_t>(i), shape),
          " is ", given[i], ", not finite in ", x.dtype());
    check(!is_stddev || rounded[i] != 0, "normalize_", "the stddev at ", index_text(static_cast<int64_t>(i), shape),
          " is ", given[i], ", 0 in ", x.dtype(),
          ": those elements would be divided by zero (a constant feature: drop it, or use a stddev of 1 for it)");
  }
  return rounded;
}

}  // namespace

Moments moments(const Tensor& x) {
  check_floating(x, "moments");
  const int64_t n = x.numel();
  return detail::dispatch_floating("moments", x.dtype(), [&]<typename T>() {
    const CentredSums sums = centred_sums(x.data<T>(), n);
    // max(n - 1, 0) = 0 makes the std of one element NaN, as torch's.
    return Moments{.mean = sums.mean, .stddev = std::sqrt(sums.squares / static_cast<double>(std::max<int64_t>(n - 1, 0)))};
  });
}

TensorMoments moments(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  check_floating(x, "moments");
  check(!std::isnan(correction), "moments", "correction must be a number, got NaN");
  const ReductionLayout layout = layout_of(x.shape(), dims, keepdim, "moments");
  TensorMoments result{.mean = make_tensor(layout.out_shape, x.dtype(), "moments"),
                       .stddev = make_tensor(layout.out_shape, x.dtype(), "moments")};
  const auto n = static_cast<double>(layout.per_result);
  // torch's max(n - correction, 0): the unbiased variance of one element is 0 / 0 = NaN.
  const double divisor = std::max(0.0, n - correction);
  detail::dispatch_floating("moments", x.dtype(), [&]<typename T>() {
    const T* values = x.data<T>();
    T* mean_out = result.mean.mutable_data<T>();
    T* stddev_out = result.stddev.mutable_data<T>();
    if (layout.results == 1) {  // every element behind one result: in parallel chunks of x
      const CentredSums sums = centred_sums(values, layout.per_result);
      mean_out[0] = static_cast<T>(sums.mean);
      stddev_out[0] = static_cast<T>(std::sqrt(sums.squares / divisor));
      return;
    }
    std::vector<double> means(static_cast<size_t>(layout.results)), squares(static_cast<size_t>(layout.results));
    sum_per_result(layout, values, [](T value, int64_t) { return static_cast<double>(value); }, means);
    for (double& mean : means) mean /= n;  // 0 / 0 = NaN for no elements, as torch's mean
    sum_per_result(layout, values, [&](T value, int64_t r) {
      const double deviation = static_cast<double>(value) - means[static_cast<size_t>(r)];
      return deviation * deviation;
    }, squares);
    for (int64_t r = 0; r < layout.results; ++r) {
      mean_out[r] = static_cast<T>(means[static_cast<size_t>(r)]);
      stddev_out[r] = static_cast<T>(std::sqrt(squares[static_cast<size_t>(r)] / divisor));
    }
  });
  return result;
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


Tensor& normalize_(Tensor& x, const Tensor& mean, const Tensor& stddev) {
  check_floating(x, "normalize_");
  check(!(is_grad_enabled() && x.requires_grad()), "normalize_", "a tensor that requires grad (shape ", x.shape(),
        ") cannot be modified in place while grad mode is on; use a tg::NoGradGuard");
  detail::dispatch_floating("normalize_", x.dtype(), [&]<typename T>() {
    // Copies, checked before x changes (x may even be one of them).
    const std::vector<T> shift = checked_values<T>(mean, "mean", x);
    const std::vector<T> scale = checked_values<T>(stddev, "stddev", x);
    if (x.numel() == 0) return;
    const Shape& shape = x.shape();
    const BroadcastOffsets shift_at(mean.shape(), shape), scale_at(stddev.shape(), shape);
    const int64_t columns = shape.empty() ? 1 : shape.back();
    T* values = x.mutable_data<T>();
    // Rows are independent: any chunking gives the same bits.
    detail::parallel_for(x.numel() / columns, std::max<int64_t>(1, detail::kElementwiseGrain / columns),
                         [&](int64_t begin, int64_t end) {
                           const int64_t shift_step = shift_at.column_stride(), scale_step = scale_at.column_stride();
                           for (int64_t row = begin; row < end; ++row) {
                             T* out = values + row * columns;
                             const T* row_shift = shift.data() + shift_at.row_offset(row, shape);
                             const T* row_scale = scale.data() + scale_at.row_offset(row, shape);
                             for (int64_t j = 0; j < columns; ++j)
                               out[j] = (out[j] - row_shift[j * shift_step]) / row_scale[j * scale_step];
                           }
                         });
  });
  detail::bump_version(x);  // a backward that saved x before this write must refuse it
  return x;
}

}  // namespace tg::data
