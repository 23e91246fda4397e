// Sorting along a dim: sort, argsort and topk, with the values' gradient.
//
// Every line along the dim ([outer, size, inner], ops/along_dim.hpp) is ordered on its own, in
// PyTorch's stable order:
//   ascending:  a before b when a < b; NaN after every number (NaNs equal to each other);
//   descending: a before b when a > b; NaN before every number;
//   equal values (−0 == +0 included) keep their order, the lower index first, in both directions.
// We realise that order without a comparator on floats: each value maps to an unsigned key whose
// integer order is the value order (ordered_key below), negated for descending, and the pairs
// (key, index) are sorted. The pairs of one line are all distinct, so every sort algorithm
// (full, partial, selection) gives the same, stable answer, and topk(k) is exactly the first k
// of sort. Lines are independent, so any thread count gives the same bits.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/along_dim.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace {

using detail::AlongDim;
using SortDTypes = detail::DTypes<kFloat32, kFloat64, kInt64>;

// The unsigned integer as wide as T.
template <typename T>
using KeyOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// A key whose unsigned order is T's order, NaN the largest and −0 equal to +0.
//   integers: flip the sign bit (two's complement → offset binary);
//   floats:   negative → all bits flipped (larger magnitude, smaller key), positive → sign bit set.
template <typename T>
KeyOf<T> ordered_key(T value) {
  using Key = KeyOf<T>;
  constexpr Key sign = Key{1} << (8 * sizeof(T) - 1);
  if constexpr (std::is_integral_v<T>) {
    return std::bit_cast<Key>(value) ^ sign;
  } else {
    if (std::isnan(value)) return std::numeric_limits<Key>::max();
    if (value == T(0)) value = T(0);  // −0 sorts as +0, as the comparison −0 < +0 is false
    const Key bits = std::bit_cast<Key>(value);
    return (bits & sign) ? ~bits : (bits | sign);
  }
}

// One element of a line: its key and its index along the dim, compared key first.
template <typename Key>
struct KeyedIndex {
  Key key;
  int64_t index;
  bool operator<(const KeyedIndex& other) const {
    return key < other.key || (key == other.key && index < other.index);
  }
};

// The same for a 32-bit key and an index below 2^32, packed into one word whose integer order is
// the pair's order: float32 lines of up to 4 G elements sort as plain uint64 values.
struct PackedKeyIndex {
  static uint64_t make(uint32_t key, int64_t index) { return (uint64_t{key} << 32) | static_cast<uint64_t>(index); }
  static int64_t index_of(uint64_t packed) { return static_cast<int64_t>(packed & 0xffffffffU); }
};

template <typename Entry, typename Key>
Entry make_entry(Key key, int64_t index) {
  if constexpr (std::is_same_v<Entry, uint64_t>)
    return PackedKeyIndex::make(key, index);
  else
    return Entry{key, index};
}

template <typename Entry>
int64_t index_of(const Entry& entry) {
  if constexpr (std::is_same_v<Entry, uint64_t>)
    return PackedKeyIndex::index_of(entry);
  else
    return entry.index;
}

// Element j of output line `line` of [outer, k, inner] sits at out_start(line) + j·inner.
int64_t out_line_start(const AlongDim& layout, int64_t line, int64_t k) {
  return (line / layout.inner) * k * layout.inner + line % layout.inner;
}

// Orders the first k entries of [first, last) (all distinct) and leaves the rest in any order.
template <typename Entry>
void order_first(Entry* first, Entry* last, int64_t k) {
  const int64_t n = last - first;
  if (k >= n) {
    std::sort(first, last);
  } else if (k * 16 <= n) {
    std::partial_sort(first, first + k, last);  // a heap of k: n·log k
  } else {
    std::nth_element(first, first + k, last);  // the k smallest in front, in linear time
    std::sort(first, first + k);
  }
}

// x: [outer, size, inner] -> indices and, unless null, values: [outer, k, inner], the first k
// elements of every line in the order of the file's header (descending or not).
template <typename T, typename Entry>
void sort_lines(const T* x, T* values, int64_t* indices, const AlongDim& layout, int64_t k, bool descending) {
  const int64_t n = layout.size, stride = layout.inner;
  // Sorting costs ~log n comparisons an element: chunks of ~4096 elements are worth a task.
  detail::parallel_for(layout.lines(), detail::ceil_div(4096, std::max<int64_t>(n, 1)), [&](int64_t begin, int64_t end) {
    std::vector<Entry> entries(static_cast<size_t>(n));
    for (int64_t line = begin; line < end; ++line) {
      const T* in = x + layout.line_start(line);
      for (int64_t j = 0; j < n; ++j) {
        const auto key = ordered_key(in[j * stride]);
        entries[j] = make_entry<Entry>(descending ? ~key : key, j);
      }
      order_first(entries.data(), entries.data() + n, k);
      const int64_t out_start = out_line_start(layout, line, k);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t index = index_of(entries[j]);
        indices[out_start + j * stride] = index;
        if (values) values[out_start + j * stride] = in[index * stride];
      }
    }
  });
}

template <typename T>
void sort_lines(const T* x, T* values, int64_t* indices, const AlongDim& layout, int64_t k, bool descending) {
  if constexpr (sizeof(T) == 4) {
    if (layout.size <= (int64_t{1} << 32)) return sort_lines<T, uint64_t>(x, values, indices, layout, k, descending);
  }
  sort_lines<T, KeyedIndex<KeyOf<T>>>(x, values, indices, layout, k, descending);
}

// dvalues, indices: [outer, k, inner] -> dx: [outer, size, inner], zeros, gets each value's
// gradient at the position it came from (the indices of a line are distinct: no sums needed).
template <typename T>
void scatter_to_lines(const T* dvalues, const int64_t* indices, T* dx, const AlongDim& layout, int64_t k) {
  detail::parallel_for(layout.lines(), detail::ceil_div(detail::kElementwiseGrain, std::max<int64_t>(k, 1)),
                       [&](int64_t begin, int64_t end) {
                         for (int64_t line = begin; line < end; ++line) {
                           const int64_t in_start = layout.line_start(line), out_start = out_line_start(layout, line, k);
                           for (int64_t j = 0; j < k; ++j)
                             dx[in_start + indices[out_start + j * layout.inner] * layout.inner] =
                                 dvalues[out_start + j * layout.inner];
                         }
                       });
}

// The first k of every line of x along dim in sorted order: values (when wanted) and indices.
// A 0-d tensor is one line of one element (and k <= 1, the result 0-d too), as in PyTorch.
Tensor::ValuesAndIndices sort_along(const Tensor& x, int64_t dim, int64_t k, bool descending, bool want_values,
                                    const char* op, const char* backward_name) {
  const int64_t d = detail::normalize_dim_0d(dim, x, op);
  const AlongDim layout = detail::along_dim(x.shape(), x.dim() == 0 ? 1 : d);
  Shape out_shape = x.shape();
  if (x.dim() > 0) out_shape[d] = k;
  const int64_t kept = x.dim() == 0 ? 1 : k;
  Tensor values = want_values ? make_tensor(out_shape, x.dtype(), op) : Tensor();
  Tensor indices = make_tensor(out_shape, kInt64, op);
  detail::dispatch<SortDTypes>(op, x.dtype(), [&]<typename T>() {
    sort_lines<T>(x.data<T>(), want_values ? values.mutable_data<T>() : nullptr, indices.mutable_data<int64_t>(),
                  layout, kept, descending);
  });
  if (want_values && autograd::needs_grad(x))
    autograd::record(values, backward_name, {x},
                     [saved_indices = autograd::SavedTensor(indices), layout, kept, in_shape = x.shape(),
                      backward_name, d](const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor& indices = grads.unpack(saved_indices);
                       if (grads.create_graph()) {
                         // recorded: a scatter_add into zeros (the indices of a line are distinct),
                         // whose gradient is a gather
                         grads.set(0, in_shape.empty() ? g.reshape(in_shape)
                                                       : scatter_add(zeros(in_shape, g.dtype()), d, indices, g));
                         return;
                       }
                       Tensor dx = zeros(in_shape, g.dtype());
                       detail::dispatch_floating(backward_name, g.dtype(), [&]<typename T>() {
                         scatter_to_lines<T>(g.data<T>(), indices.data<int64_t>(), dx.mutable_data<T>(), layout, kept);
                       });
                       grads.set(0, dx);
                     });
  return {values, indices};
}

void check_input(const Tensor& x, const char* op) {
  check(x.defined(), op, "undefined input");
  detail::check_dtype<SortDTypes>(op, x.dtype());
}

}  // namespace

Tensor::ValuesAndIndices Tensor::sort(int64_t dim, bool descending) const try {
  check_input(*this, "sort");
  const int64_t size = this->dim() == 0 ? 1 : this->size(detail::normalize_dim_0d(dim, *this, "sort"));
  return sort_along(*this, dim, size, descending, true, "sort", "SortBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("sort");
}

Tensor Tensor::argsort(int64_t dim, bool descending) const try {
  check_input(*this, "argsort");
  const int64_t size = this->dim() == 0 ? 1 : this->size(detail::normalize_dim_0d(dim, *this, "argsort"));
  return sort_along(*this, dim, size, descending, false, "argsort", "").indices;
} catch (...) {
  detail::rethrow_out_of_memory_as("argsort");
}

Tensor::ValuesAndIndices Tensor::topk(int64_t k, int64_t dim, bool largest, bool /*sorted*/) const try {
  check_input(*this, "topk");
  const int64_t d = detail::normalize_dim_0d(dim, *this, "topk");
  const int64_t size = this->dim() == 0 ? 1 : this->size(d);
  check(k >= 0 && k <= size, "topk", "selected index k out of range: expected 0 <= k <= ", size, " (the size of dim ",
        dim, " of the input of shape ", shape(), "), got k = ", k);
  return sort_along(*this, dim, k, largest, true, "topk", "TopkBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("topk");
}

Tensor::ValuesAndIndices sort(const Tensor& x, int64_t dim, bool descending) { return x.sort(dim, descending); }
Tensor argsort(const Tensor& x, int64_t dim, bool descending) { return x.argsort(dim, descending); }
Tensor::ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return x.topk(k, dim, largest, sorted);
}

}  // namespace tg
