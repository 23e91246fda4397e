// In-place writes: the rules every in-place op follows (check_inplace, finish_inplace), the
// write-back of narrow/select/slice/index results to the tensor they were copied from, index_put_,
// and the in-place arithmetic add_, sub_, mul_, div_.
//
// PyTorch's rules, on the tape. A recorded in-place op makes its node the tensor's grad_fn, with
// the tensor's previous grad_fn as an input ("rebase"), and moves the storage's version, so that a
// backward that saved the old values refuses them. Arithmetic computes its result with the
// out-of-place op, whose node (and gradient rule) the tensor then takes over; when that node saves
// its first operand, the operand is a clone of the old values, which the write does not touch.
//
// Tensors are always contiguous, so narrow, select, slice and index return copies. Each remembers
// its region of the source (SliceOf, ops/slicing.hpp); an in-place op on it writes that region of
// the source too and records it there as CopySlices (the source's old values outside the region,
// the copy's new values inside), as PyTorch does for a write through a view.
#include <cstring>

#include "dispatch.hpp"
#include "ops/slicing.hpp"
#include "out_of_memory.hpp"

namespace tg {

namespace detail {

namespace {

// Every element of `a` equals the element of `b` at the same row-major position (bytes compared:
// a NaN matches itself).
bool same_values(const Tensor& a, const Tensor& b) {
  return std::memcmp(impl_of(a)->storage->data, impl_of(b)->storage->data,
                     static_cast<size_t>(a.numel()) * element_size(a.dtype())) == 0;
}

// self's `region` ← src (region's element count, row-major), in place; recorded as
// `backward_name` with the old self and src as inputs when either takes part in differentiation.
void assign_region(const Tensor& self, const StridedLayout& region, const Tensor& src, const char* op,
                   const char* backward_name) {
  Tensor target = self;
  strided_scatter(src, target, region);
  if (autograd::needs_grad(self, src))
    autograd::record(target, backward_name, {self, src},
                     [region, src_shape = src.shape()](const Tensor& g, autograd::GradInputs& grads) {
                       region_backward(g, grads, region, src_shape);
                     });
  finish_inplace(self, op);
}

const char* const kLeafMessage =
    "a leaf Variable that requires grad is being used in an in-place operation (PyTorch's rule: the gradient "
    "is taken at the leaf's value). Write under a tg::NoGradGuard, as optimizers do, or to a clone()";

}  // namespace

void share_storage(const Tensor& base, const Tensor& view) {
  for (const Tensor* member : {&base, &view}) {
    TensorImpl* impl = impl_of(*member);
    Storage* expected = nullptr;
    if (impl->alias.storage.compare_exchange_strong(expected, impl->storage.get())) impl->storage->aliases.fetch_add(1);
  }
  if (base.requires_grad() || view.requires_grad()) impl_of(view)->storage->grad_alias.store(true);
  impl_of(view)->slice_of = impl_of(base)->slice_of;
}

void check_inplace(const Tensor& t, const char* op, bool value_requires_grad) {
  check(t.defined(), op, "called on an undefined tensor");
  const bool grad_mode = is_grad_enabled();
  // Whether the write to the tensor in hand is recorded: then so is its write-back to the base.
  bool recorded = grad_mode && (t.requires_grad() || value_requires_grad);
  Tensor current = t;
  for (bool is_base = false;; is_base = true) {
    const TensorImpl& impl = *impl_of(current);
    if (grad_mode && impl.grad_fn == nullptr && impl.requires_grad) [[unlikely]] {
      if (is_base)
        fail(op, "the tensor of shape ", impl.shape, " this one (shape ", t.shape(),
             ") was sliced from is a leaf that requires grad: a view of a leaf Variable that requires grad is being "
             "used in an in-place operation. Write under a tg::NoGradGuard, or slice a clone()");
      fail(op, kLeafMessage, " (shape ", impl.shape, ")");
    }
    const Storage& storage = *impl.storage;
    check(!(grad_mode && storage.aliases.load() > 1 && (recorded || storage.grad_alias.load())), op,
          "the tensor of shape ", impl.shape, " shares its storage with another live tensor made by view, reshape, "
          "unsqueeze, squeeze, flatten or unflatten; an in-place op on one of them would leave the other's "
          "gradient wrong (tapegrad does not rebase views). Write to a clone(), let the other view go first, or "
          "write under a tg::NoGradGuard");
    if (!impl.slice_of) return;
    const SliceOf& slice = *impl.slice_of;
    const std::shared_ptr<TensorImpl> base = slice.base.lock();
    if (!base) return;  // nothing can see the source any more: the copy is all there is
    check(base->storage == slice.base_storage.lock(), op, "the tensor of shape ", base->shape,
          " this one (shape ", impl.shape, ") was sliced from has been given new storage since (set_data, "
          "Module::to), so the write cannot reach it; slice it again");
    // A write to the source since the copy was taken is fine as long as the region still holds the
    // copy's values; otherwise writing the copy back would undo that write with stale values.
    if (base->storage->version != slice.base_version)
      check(same_values(strided_gather(TensorAccess::wrap(base), slice.region, op), current), op,
            "the tensor of shape ", base->shape, " this one (shape ", impl.shape,
            ") was sliced from has been written in place since, inside the region, and writing the copy back "
            "would undo that write (narrow, select, slice and index return copies in tapegrad, not views): "
            "slice again after the other write, or write with index_put_ on the source");
    recorded = grad_mode && (recorded || base->grad_fn != nullptr || base->requires_grad);
    current = TensorAccess::wrap(base);
  }
}

void finish_inplace(const Tensor& t, const char* op) {
  bump_version(t);
  TensorImpl* impl = impl_of(t);
  if (!impl->slice_of) return;
  SliceOf& slice = *impl->slice_of;
  const std::shared_ptr<TensorImpl> base = slice.base.lock();
  if (!base) return;
  assign_region(TensorAccess::wrap(base), slice.region, t, op, "CopySlices");
  slice.base_version = base->storage->version;
}

}  // namespace detail

// --- index_put_ --------------------------------------------------------------------------------------

namespace {

// value (self's dtype) broadcast to `region`'s shape, as PyTorch's index_put_ and copy_ accept it:
// leading dims of size 1 beyond the region's may be dropped. Recorded (reshape, expand), so the
// gradient is summed back to value's shape.
Tensor broadcast_value(const Tensor& self, const detail::StridedLayout& region, const Tensor& value, const char* op) {
  check(value.defined(), op, "undefined value");
  check(value.dtype() == self.dtype(), op, "value is ", value.dtype(), " but the tensor is ", self.dtype(),
        " (convert the value with ", detail::cast_to(self.dtype()), ")");
  Shape shape = value.shape();
  while (shape.size() > region.shape.size() && shape.front() == 1) shape.erase(shape.begin());
  bool broadcasts = shape.size() <= region.shape.size();
  for (size_t k = 0; broadcasts && k < shape.size(); ++k) {
    const int64_t size = shape[k], target = region.shape[region.shape.size() - shape.size() + k];
    broadcasts = size == target || size == 1;
  }
  check(broadcasts, op, "value of shape ", value.shape(), " cannot be broadcast to the indexed region's shape ",
        region.shape, " (of a tensor of shape ", self.shape(), ")");
  Tensor out = shape == value.shape() ? value : value.reshape(shape);
  if (out.shape() != region.shape) out = out.expand(region.shape);
  // A value sharing self's bytes would be read while they are written.
  if (detail::impl_of(out)->storage == detail::impl_of(self)->storage) out = out.clone();
  return out;
}

}  // namespace

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value) try {
  check(defined(), "index_put_", "called on an undefined tensor");
  const detail::StridedLayout region = detail::index_region(detail::whole(shape()), indices, "index_put_");
  const Tensor source = broadcast_value(*this, region, value, "index_put_");
  detail::check_inplace(*this, "index_put_", source.requires_grad());
  detail::assign_region(*this, region, source, "index_put_", "IndexPutBackward");
  return *this;
} catch (...) {
  detail::rethrow_out_of_memory_as("index_put_");
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, double value) try {
  check(defined(), "index_put_", "called on an undefined tensor");
  return index_put_(indices, scalar_tensor(value, dtype()));
} catch (...) {
  detail::rethrow_out_of_memory_as("index_put_");
}

Tensor& Tensor::operator=(const Tensor& source) && {
  check(defined(), "operator=", "assignment to an undefined temporary tensor");
  return index_put_({indexing::Ellipsis}, source);
}

Tensor& Tensor::operator=(double value) && { return fill_(value); }

// --- in-place arithmetic -------------------------------------------------------------------------------

namespace {

// self ← compute(old self, other), where other broadcasts to self's shape and has its floating
// dtype. `saves_first`: the out-of-place op saves its first operand for backward, so a recorded
// op computes from a clone of the old values (the write would otherwise fail their version check).
template <typename Compute>
Tensor& inplace_binary(Tensor& self, const Tensor& other, const char* op, bool saves_first, const Compute& compute) try {
  check(self.defined() && other.defined(), op, "undefined tensor operand");
  check(is_floating_point(self.dtype()), op, "in-place arithmetic needs a float32 or float64 tensor, got ",
        self.dtype(), " (convert with ", detail::cast_to(kFloat32), ")");
  check(other.dtype() == self.dtype(), op, "the operand is ", other.dtype(), " but the tensor is ", self.dtype(),
        " (convert the operand with ", detail::cast_to(self.dtype()), ")");
  check(broadcast_shapes(self.shape(), other.shape(), op) == self.shape(), op, "an operand of shape ", other.shape(),
        " does not broadcast to the tensor's shape ", self.shape(), " (an in-place result keeps the tensor's shape)");
  detail::check_inplace(self, op, other.requires_grad());
  const bool recorded = autograd::needs_grad(self, other);
  const Tensor values = compute(recorded && saves_first ? self.clone() : self, other);
  TensorImpl* impl = detail::impl_of(self);
  const TensorImpl* result = detail::impl_of(values);
  std::memcpy(impl->storage->data, result->storage->data, static_cast<size_t>(self.numel()) * element_size(self.dtype()));
  if (result->grad_fn) {
    impl->grad_fn = result->grad_fn;
    impl->output_nr = result->output_nr;
  }
  detail::finish_inplace(self, op);
  return self;
} catch (...) {
  detail::rethrow_out_of_memory_as(op);
}

Tensor scalar_for(const Tensor& self, double value) {
  return scalar_tensor(value, self.defined() ? self.dtype() : kFloat32);
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return inplace_binary(*this, other, "add_", false,
                        [alpha](const Tensor& a, const Tensor& b) { return alpha == 1.0 ? a + b : a + b * alpha; });
}
Tensor& Tensor::add_(double other) { return add_(scalar_for(*this, other)); }
Tensor& Tensor::sub_(const Tensor& other, double alpha) {
  return inplace_binary(*this, other, "sub_", false,
                        [alpha](const Tensor& a, const Tensor& b) { return alpha == 1.0 ? a - b : a - b * alpha; });
}
Tensor& Tensor::sub_(double other) { return sub_(scalar_for(*this, other)); }
Tensor& Tensor::mul_(const Tensor& other) {
  return inplace_binary(*this, other, "mul_", true, [](const Tensor& a, const Tensor& b) { return a * b; });
}
Tensor& Tensor::mul_(double other) { return mul_(scalar_for(*this, other)); }
Tensor& Tensor::div_(const Tensor& other) {
  return inplace_binary(*this, other, "div_", true, [](const Tensor& a, const Tensor& b) { return a / b; });
}
Tensor& Tensor::div_(double other) { return div_(scalar_for(*this, other)); }

}  // namespace tg
