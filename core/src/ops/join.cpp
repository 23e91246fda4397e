// Joining and splitting along a dim: cat, stack, split (by one size or by a list of sizes), chunk.
//
// All of them move whole slabs: in the [outer, size, inner] view of a tensor (ops/along_dim.hpp),
// the elements k in [start, start + length) of every outer row are length·inner contiguous values.
// One copy kernel moves such slabs for the forward and the backward of every op here. A recorded
// backward (create_graph) moves them with recorded ops instead (narrow, cat with zeros), each the
// other's gradient, so that it can be differentiated again.
#include <algorithm>
#include <numeric>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/along_dim.hpp"
#include "ops/broadcast.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"

namespace tg {
namespace {

// Copies the slab [src_start, src_start + length) along `dim` of src into dst at dst_start along
// the same dim; both contiguous, of one dtype, with equal sizes in every other dim.
void copy_slab(const Tensor& src, int64_t src_start, Tensor& dst, int64_t dst_start, int64_t dim, int64_t length) {
  const detail::AlongDim from = detail::along_dim(src.shape(), dim), to = detail::along_dim(dst.shape(), dim);
  const int64_t run = length * from.inner;  // contiguous elements per outer row
  if (run == 0) return;
  detail::dispatch_all("copy_slab", src.dtype(), [&]<typename T>() {
    const T* in = src.data<T>() + src_start * from.inner;
    T* out = dst.mutable_data<T>() + dst_start * to.inner;
    detail::parallel_for(from.outer, detail::ceil_div(detail::kElementwiseGrain, run), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o)
        std::copy(in + o * from.size * from.inner, in + o * from.size * from.inner + run, out + o * to.size * to.inner);
    });
  });
}

// x's elements [start, start + length) along dim, as a new tensor; the gradient goes back into the
// same slab of a zero tensor of x's shape.
Tensor narrow_copy(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Shape shape = x.shape();
  shape[dim] = length;
  Tensor piece = make_tensor(shape, x.dtype(), "split");
  copy_slab(x, start, piece, 0, dim, length);
  if (autograd::needs_grad(x))
    autograd::record(piece, "SplitBackward", {x},
                     [in_shape = x.shape(), dim, start, length](const Tensor& g, autograd::GradInputs& grads) {
                       if (grads.create_graph()) {  // recorded: g between two blocks of zeros
                         Shape before = in_shape, after = in_shape;
                         before[dim] = start;
                         after[dim] = in_shape[dim] - start - length;
                         grads.set(0, cat({zeros(before, g.dtype()), g, zeros(after, g.dtype())}, dim));
                         return;
                       }
                       Tensor dx = zeros(in_shape, g.dtype());
                       copy_slab(g, 0, dx, start, dim, length);
                       grads.set(0, dx);
                     });
  return piece;
}

// The pieces of x along dim with the given sizes (validated by the caller).
std::vector<Tensor> split_into(const Tensor& x, int64_t dim, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> pieces;
  pieces.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t length : sizes) {
    pieces.push_back(narrow_copy(x, dim, start, length));
    start += length;
  }
  return pieces;
}

int64_t split_dim(const Tensor& x, int64_t dim, const char* op) {
  check(x.defined(), op, "undefined input");
  check(x.dim() > 0, op, "expected a tensor with at least 1 dim, got a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

}  // namespace

// PyTorch's legacy rule is kept: a 1-D tensor of shape [0] is skipped whatever the other shapes.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) try {
  const char* op = "cat";
  check(!tensors.empty(), op, "expected a non-empty list of tensors");
  std::vector<size_t> used;  // positions of the tensors that take part
  DType common = tensors[0].defined() ? tensors[0].dtype() : kFloat32;
  for (size_t i = 0; i < tensors.size(); ++i) {
    check(tensors[i].defined(), op, "undefined tensor at position ", i);
    check(tensors[i].dim() > 0, op, "a 0-d tensor (at position ", i, ") cannot be concatenated");
    common = detail::promote_types(common, tensors[i].dtype());
    if (!(tensors[i].dim() == 1 && tensors[i].numel() == 0)) used.push_back(i);
  }
  // Tensors of different dtypes are concatenated in their promoted dtype, as torch.cat: each cast
  // recorded, so each gradient comes back in its tensor's dtype.
  if (std::any_of(tensors.begin(), tensors.end(), [common](const Tensor& t) { return t.dtype() != common; })) {
    std::vector<Tensor> promoted;
    promoted.reserve(tensors.size());
    for (const Tensor& t : tensors) promoted.push_back(t.to(common));
    return cat(promoted, dim);
  }
  if (used.empty()) {
    // Every input is a skipped [0] tensor: the result is [0] too, and still a result of the inputs
    // (PyTorch records CatBackward here), so each input that requires grad gets an empty gradient.
    Tensor out = make_tensor({0}, tensors[0].dtype(), op);
    bool any_needs_grad = false;
    for (const Tensor& t : tensors) any_needs_grad |= autograd::needs_grad(t);
    if (any_needs_grad)
      autograd::record_list(out, "CatBackward", tensors, [count = tensors.size()](const Tensor& g, autograd::GradInputs& grads) {
        for (size_t i = 0; i < count; ++i)
          if (grads.needed(i)) grads.set(i, make_tensor({0}, g.dtype()));
      });
    return out;
  }
  const Tensor& first = tensors[used[0]];
  const int64_t d = normalize_dim(dim, first.dim(), op);
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  for (size_t i : used) {
    const Shape& shape = tensors[i].shape();
    bool match = shape.size() == first.shape().size();
    for (size_t k = 0; match && k < shape.size(); ++k)
      match = static_cast<int64_t>(k) == d || shape[k] == first.shape()[k];
    check(match, op, "expected tensors of shape ", first.shape(), " except in dim ", dim, ", got ", shape,
          " at position ", i);
    out_shape[d] += shape[d];
  }
  Tensor out = make_tensor(out_shape, first.dtype(), op);
  std::vector<int64_t> starts;  // where each used tensor begins along dim
  for (int64_t start = 0; size_t i : used) {
    starts.push_back(start);
    copy_slab(tensors[i], 0, out, start, d, tensors[i].size(d));
    start += tensors[i].size(d);
  }
  // Every tensor of the list is an input of the node; the skipped ones get no gradient.
  bool any_needs_grad = false;
  for (const Tensor& t : tensors) any_needs_grad |= autograd::needs_grad(t);
  if (any_needs_grad)
    autograd::record_list(out, "CatBackward", tensors, [used, starts, d, shapes = [&] {
                            std::vector<Shape> s;
                            for (size_t i : used) s.push_back(tensors[i].shape());
                            return s;
                          }()](const Tensor& g, autograd::GradInputs& grads) {
      for (size_t j = 0; j < used.size(); ++j) {
        if (!grads.needed(used[j])) continue;
        if (grads.create_graph()) {  // recorded: the slab, by narrow
          grads.set(used[j], g.narrow(d, starts[j], shapes[j][d]));
          continue;
        }
        Tensor piece = make_tensor(shapes[j], g.dtype());
        copy_slab(g, starts[j], piece, 0, d, shapes[j][d]);
        grads.set(used[j], piece);
      }
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("cat");
}

// stack = cat of the tensors each given a new dim of size 1 at `dim`.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) try {
  const char* op = "stack";
  check(!tensors.empty(), op, "expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    check(tensors[i].defined(), op, "undefined tensor at position ", i);
    check(tensors[i].shape() == tensors[0].shape(), op, "expected tensors of one shape, got ", tensors[0].shape(),
          " at position 0 and ", tensors[i].shape(), " at position ", i);
  }
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, op);
  Shape unsqueezed = tensors[0].shape();
  unsqueezed.insert(unsqueezed.begin() + d, 1);
  std::vector<Tensor> pieces;
  pieces.reserve(tensors.size());
  for (const Tensor& t : tensors) pieces.push_back(t.reshape(unsqueezed));
  return cat(pieces, d);
} catch (...) {
  detail::rethrow_out_of_memory_as("stack");
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) try {
  const int64_t d = split_dim(x, dim, "split");
  const int64_t size = x.size(d);
  check(split_size >= 0, "split", "expected a non-negative split_size, got ", split_size);
  check(split_size > 0 || size == 0, "split", "split_size can only be 0 if the dim is empty, got dim ", dim,
        " of size ", size);
  // ceil(size / split_size) pieces, at least one; the last holds the remainder.
  const int64_t count = split_size == 0 ? 1 : std::max<int64_t>(detail::ceil_div(size, split_size), 1);
  std::vector<int64_t> sizes(static_cast<size_t>(count), split_size);
  sizes.back() = size - split_size * (count - 1);
  return split_into(x, d, sizes);
} catch (...) {
  detail::rethrow_out_of_memory_as("split");
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) try {
  const int64_t d = split_dim(x, dim, "split");
  for (int64_t length : split_sizes)
    check(length >= 0, "split", "expected non-negative split_sizes, got ", split_sizes);
  const int64_t total = std::accumulate(split_sizes.begin(), split_sizes.end(), int64_t{0});
  check(total == x.size(d), "split", "expected split_sizes to sum to ", x.size(d), " (the size of dim ", dim,
        " of a tensor of shape ", x.shape(), "), got ", split_sizes);
  return split_into(x, d, split_sizes);
} catch (...) {
  detail::rethrow_out_of_memory_as("split");
}

// PyTorch's chunk: pieces of ceil(size / chunks), so there may be fewer than `chunks`; an empty
// dim gives `chunks` empty pieces.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) try {
  const int64_t d = split_dim(x, dim, "chunk");
  check(chunks > 0, "chunk", "expected chunks > 0, got ", chunks);
  if (x.size(d) == 0) return split_into(x, d, std::vector<int64_t>(static_cast<size_t>(chunks), 0));
  return split(x, detail::ceil_div(x.size(d), chunks), d);
} catch (...) {
  detail::rethrow_out_of_memory_as("chunk");
}

std::vector<Tensor> split(const Tensor& x, std::initializer_list<int64_t> split_sizes, int64_t dim) {
  return split(x, std::vector<int64_t>(split_sizes), dim);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return tg::split(*this, split_size, dim); }
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& split_sizes, int64_t dim) const {
  return tg::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::split(std::initializer_list<int64_t> split_sizes, int64_t dim) const {
  return tg::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return tg::chunk(*this, chunks, dim); }

}  // namespace tg
