// The Tensor handle: storage, accessors, creation, conversions, and the autograd entry points.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <utility>

#include "autograd/node.hpp"
#include "bfloat16_kernels.hpp"
#include "autograd/pass_op.hpp"
#include "tapegrad/autograd/grad.hpp"
#include "convert.hpp"
#include "dispatch.hpp"
#include "memory/block_cache.hpp"
#include "memory/small_block_pool.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg {

// --- storage and impl helpers -------------------------------------------------------------------

namespace {
constexpr size_t kAlignment = 64;  // a cache line, and an AVX-512 vector
constexpr size_t kNewAlignment = __STDCPP_DEFAULT_NEW_ALIGNMENT__;  // what operator new guarantees

// The allocator std::allocate_shared uses for a Storage: it appends the tensor's bytes, 64-byte
// aligned, to the control block, so a Storage costs one allocation. It aligns by hand inside a
// plain operator new block (malloc underneath): glibc's aligned allocation (memalign) splits
// chunks and showed up as a visible share of the per-op overhead of small graphs. The block comes
// from the small-block pool (memory/small_block_pool.hpp), which recycles the blocks of small
// tensors per thread and goes to operator new for the others, so that a replaced operator new
// (the fault-injection tests) sees every new block. `trailing` receives the bytes' address.
template <typename T>
struct TrailingBytesAllocator {
  using value_type = T;
  size_t bytes;  // the tensor's bytes after the control block
  std::byte** trailing;

  TrailingBytesAllocator(size_t bytes, std::byte** trailing) : bytes(bytes), trailing(trailing) {}
  template <typename U>
  TrailingBytesAllocator(const TrailingBytesAllocator<U>& other) : bytes(other.bytes), trailing(other.trailing) {}

  T* allocate(size_t n) {
    // operator new aligns to __STDCPP_DEFAULT_NEW_ALIGNMENT__, so once the control block is
    // padded to that alignment, kAlignment minus it bytes of slack reach the next 64-byte boundary.
    const size_t head = (n * sizeof(T) + kNewAlignment - 1) / kNewAlignment * kNewAlignment;
    void* block = detail::allocate_small_block(block_bytes(n));
    const uintptr_t end_of_head = reinterpret_cast<uintptr_t>(block) + head;
    *trailing = reinterpret_cast<std::byte*>((end_of_head + kAlignment - 1) / kAlignment * kAlignment);
    return static_cast<T*>(block);
  }
  void deallocate(T* block, size_t n) noexcept { detail::release_small_block(block, block_bytes(n)); }
  size_t block_bytes(size_t n) const {
    return (n * sizeof(T) + kNewAlignment - 1) / kNewAlignment * kNewAlignment + kAlignment - kNewAlignment + bytes;
  }
  template <typename U>
  bool operator==(const TrailingBytesAllocator<U>& other) const { return bytes == other.bytes; }
};
}  // namespace

std::shared_ptr<Storage> allocate_storage(size_t nbytes) {
  if (nbytes >= detail::kCachedBlockMinBytes) {
    const detail::CachedBlock block = detail::acquire_cached_block(nbytes);
    try {
      return std::make_shared<Storage>(block.data, nbytes, block.capacity);
    } catch (...) {
      detail::release_cached_block(block);
      throw;
    }
  }
  std::byte* data = nullptr;
  auto storage = std::allocate_shared<Storage>(TrailingBytesAllocator<Storage>(nbytes, &data), nullptr, nbytes);
  storage->data = data;
  return storage;
}

Storage::~Storage() {
  if (cached_capacity != 0) detail::release_cached_block({data, cached_capacity});
}

int64_t checked_numel(const Shape& shape, const char* op) {
  // The product of the non-zero dims must fit too, even when another dim is 0: kernels compute
  // strides and row counts from partial products of the dims, which must never overflow.
  // (PyTorch accepts [0, 2^62, 2^62] but not [2^62, 2^62, 0]; we refuse both.)
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (int64_t size : shape) {
    check(size >= 0, op, "negative dimension ", size, " in shape ", shape);
    if (size == 0) {
      has_zero = true;
      continue;
    }
    // A multiply with an overflow flag, not a division: this runs for every dim of every tensor.
    int64_t product = 0;
    check(!__builtin_mul_overflow(nonzero_product, size, &product) &&
              product <= std::numeric_limits<int64_t>::max() / 8,
          op, "shape ", shape, " has too many elements to address");
    nonzero_product = product;
  }
  return has_zero ? 0 : nonzero_product;
}

Tensor make_tensor(const Shape& shape, DType dtype, const char* op) {
  const int64_t numel = checked_numel(shape, op);
  const size_t bytes = static_cast<size_t>(numel) * element_size(dtype);
  try {
    auto impl = std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>());
    impl->numel = numel;
    impl->shape = shape;
    impl->dtype = dtype;
    impl->storage = allocate_storage(bytes);
    return tg::detail::TensorAccess::wrap(std::move(impl));
  } catch (const std::bad_alloc&) {
    throw detail::OutOfMemoryError(
        op, detail::concat("cannot allocate ", bytes, " bytes for a ", dtype, " tensor of shape ", shape));
  }
}

Tensor make_view(const Tensor& base, const Shape& shape) {
  auto impl = std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>());
  impl->shape = shape;
  impl->numel = base.numel();
  impl->dtype = base.dtype();
  impl->storage = tg::detail::impl_of(base)->storage;
  return tg::detail::TensorAccess::wrap(std::move(impl));
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  check(dim >= -ndim && dim < ndim, op, "dim ", dim, " is out of range for a tensor with ", ndim,
        " dims (expected a dim in [", -ndim, ", ", ndim - 1, "])");
  return dim < 0 ? dim + ndim : dim;
}

std::string to_string(const Shape& shape) { return detail::concat(shape); }

// --- accessors -----------------------------------------------------------------------------------

namespace {
const TensorImpl& checked(const Tensor& t, const char* what) {
  check(t.defined(), what, "called on an undefined tensor");
  return *tg::detail::impl_of(t);
}
}  // namespace

const Shape& Tensor::shape() const { return checked(*this, "shape").shape; }
int64_t Tensor::dim() const { return static_cast<int64_t>(checked(*this, "dim").shape.size()); }
int64_t Tensor::numel() const { return checked(*this, "numel").numel; }
DType Tensor::dtype() const { return checked(*this, "dtype").dtype; }
int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim(), "size")]; }

template <typename T>
const T* Tensor::data() const {
  const TensorImpl& impl = checked(*this, "data");
  check(impl.dtype == dtype_of<T>(), "data", "requested ", dtype_of<T>(), " data from a ", impl.dtype, " tensor");
  return impl.data<T>();
}

template <typename T>
T* Tensor::mutable_data() {
  const TensorImpl& impl = checked(*this, "mutable_data");
  check(impl.dtype == dtype_of<T>(), "mutable_data", "requested ", dtype_of<T>(), " data from a ", impl.dtype,
        " tensor");
  return impl.data<T>();
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  const T* values = data<T>();
  return std::vector<T>(values, values + numel());
}

template <typename T>
T Tensor::item() const {
  check(numel() == 1, "item", "a tensor with ", numel(), " elements (shape ", shape(),
        ") cannot be converted to a scalar");
  T value;
  detail::dispatch_all("item", dtype(), [&]<typename From>() { detail::convert_values(data<From>(), &value, 1, "item"); });
  return value;
}

double Tensor::item() const { return item<double>(); }

#define TG_INSTANTIATE_ACCESSORS(T)                    \
  template const T* Tensor::data<T>() const;           \
  template T* Tensor::mutable_data<T>();               \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
TG_INSTANTIATE_ACCESSORS(float)
TG_INSTANTIATE_ACCESSORS(double)
TG_INSTANTIATE_ACCESSORS(int64_t)
TG_INSTANTIATE_ACCESSORS(bool)
TG_INSTANTIATE_ACCESSORS(BFloat16)
#undef TG_INSTANTIATE_ACCESSORS

// --- in-place initialisation ---------------------------------------------------------------------
// The rules of every in-place op (detail::check_inplace, finish_inplace: ops/inplace.cpp). fill_ and
// copy_ are recorded on a tensor that requires grad (not a leaf, which is refused in grad mode):
// fill_ cuts the gradient to the old values, copy_ passes it to the source.

Tensor& Tensor::fill_(double value) {
  detail::check_inplace(*this, "fill_", false);
  detail::dispatch_all("fill_", dtype(), [&]<typename T>() {
    T converted;
    detail::convert_values(&value, &converted, 1, "fill_");
    T* out = mutable_data<T>();
    std::fill(out, out + numel(), converted);
  });
  if (autograd::needs_grad(*this))
    autograd::record(*this, "FillBackward", {}, [](const Tensor&, autograd::GradInputs&) {});
  detail::finish_inplace(*this, "fill_");
  return *this;
}

Tensor& Tensor::copy_(const Tensor& source) {
  check(defined(), "copy_", "called on an undefined tensor");
  check(source.defined() && source.shape() == shape() && source.dtype() == dtype(), "copy_", "expected a ",
        dtype(), " tensor of shape ", shape(), ", got ", source.defined() ? name(source.dtype()) : "undefined", " ",
        source.defined() ? source.shape() : Shape{});
  detail::check_inplace(*this, "copy_", source.requires_grad());
  if (tg::detail::impl_of(source)->storage != impl_.get()->storage)
    std::memcpy(impl_.get()->storage->data, tg::detail::impl_of(source)->storage->data, static_cast<size_t>(numel()) * element_size(dtype()));
  if (autograd::needs_grad(*this, source))
    autograd::record(*this, "CopyBackwards", {source},
                     [](const Tensor& g, autograd::GradInputs& grads) { grads.set(0, g); });
  detail::finish_inplace(*this, "copy_");
  return *this;
}

// --- creation --------------------------------------------------------------------------------------

namespace {
// full() under the name of the function the user called, which errors report.
Tensor filled(const Shape& shape, double value, DType dtype, const char* op) {
  Tensor out = make_tensor(shape, dtype, op);
  NoGradGuard no_grad;
  return out.fill_(value);
}
// The *_like functions: t's shape and dtype, under the name of the function called.
Tensor filled_like(const Tensor& t, double value, const char* op) {
  check(t.defined(), op, "undefined tensor");
  return filled(t.shape(), value, t.dtype(), op);
}
}  // namespace

Tensor empty(const Shape& shape, DType dtype) { return make_tensor(shape, dtype, "empty"); }
Tensor full(const Shape& shape, double value, DType dtype) { return filled(shape, value, dtype, "full"); }
Tensor zeros(const Shape& shape, DType dtype) { return filled(shape, 0.0, dtype, "zeros"); }
Tensor ones(const Shape& shape, DType dtype) { return filled(shape, 1.0, dtype, "ones"); }
Tensor scalar_tensor(double value, DType dtype) { return filled({}, value, dtype, "scalar_tensor"); }
Tensor zeros_like(const Tensor& t) { return filled_like(t, 0.0, "zeros_like"); }
Tensor ones_like(const Tensor& t) { return filled_like(t, 1.0, "ones_like"); }
Tensor full_like(const Tensor& t, double value) { return filled_like(t, value, "full_like"); }

Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype) try {
  const Shape resolved = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  Tensor out = make_tensor(resolved, dtype, "tensor");
  check(out.numel() == static_cast<int64_t>(values.size()), "tensor", values.size(),
        " values do not fill shape ", resolved, " (", out.numel(), " elements)");
  detail::dispatch_all("tensor", dtype, [&]<typename T>() {
    detail::convert_values(values.data(), out.mutable_data<T>(), out.numel(), "tensor");
  });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("tensor");
}

template <TensorData T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, DType dtype) try {
  const Shape resolved = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  Tensor out = make_tensor(resolved, dtype, "tensor");
  check(out.numel() == static_cast<int64_t>(values.size()), "tensor", values.size(),
        " values do not fill shape ", resolved, " (", out.numel(), " elements)");
  detail::dispatch_all("tensor", dtype, [&]<typename To>() {
    To* result = out.mutable_data<To>();
    if constexpr (std::is_same_v<T, bool>) {
      // std::vector<bool> packs its bits and has no data(): one element at a time.
      for (size_t i = 0; i < values.size(); ++i) result[i] = detail::convert_value<To>(static_cast<bool>(values[i]));
    } else {
      detail::convert_values(values.data(), result, out.numel(), "tensor");
    }
  });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("tensor");
}
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&, DType);
template Tensor tensor<float>(const std::vector<float>&, const Shape&, DType);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&, DType);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, const Shape&, DType);

// torch.arange's rules (RangeFactories.cpp): the arguments are read in the result's accumulation
// type (int64 for int64, double for the floats), the size is ceil((end − start) / step) in double
// for the floats and the exact integer formula for int64, and element i is start + i·step in that
// type, rounded once to the dtype.
Tensor detail::arange(ArangeScalar start, ArangeScalar end, ArangeScalar step, std::optional<DType> dtype) try {
  const DType out_dtype = dtype.value_or(start.integral && end.integral && step.integral ? kInt64 : kFloat32);
  check(out_dtype != kBool, "arange", "not implemented for bool tensors (int64, float32 or float64); pass tg::kInt64 and "
        "cast with .to(tg::kBool)");
  check(step.floating != 0.0, "arange", "step must be nonzero");
  check(std::isfinite(start.floating) && std::isfinite(end.floating) && std::isfinite(step.floating), "arange",
        "unsupported range: ", start.floating, " -> ", end.floating, " with step ", step.floating);
  const auto wrong_sign = [&] {
    return concat("upper bound and lower bound inconsistent with step sign: ", start.floating, " -> ", end.floating,
                  " with step ", step.floating);
  };
  if (out_dtype == kInt64) {
    // Floating-point arguments truncate toward zero first, as PyTorch reads them.
    const auto to_int = [](const ArangeScalar& s) {
      check(s.integral || (s.floating >= -0x1p63 && s.floating < 0x1p63), "arange", "bound ", s.floating,
            " is outside int64's range");
      return s.integral ? s.integer : static_cast<int64_t>(s.floating);
    };
    const int64_t first = to_int(start), last = to_int(end), stride = to_int(step);
    check(stride != 0, "arange", "step must be nonzero (", step.floating, " truncated to int64)");
    check(stride > 0 ? last >= first : last <= first, "arange", wrong_sign());
    // ceil((last − first) / stride) = (last − first + stride − sign) / stride, in 128 bits.
    const __int128 count = (static_cast<__int128>(last) - first + stride - (stride > 0 ? 1 : -1)) / stride;
    check(count <= INT64_MAX, "arange", "invalid size, possible overflow: ", first, " -> ", last, " with step ", stride);
    Tensor out = make_tensor({static_cast<int64_t>(count)}, kInt64, "arange");
    int64_t* values = out.mutable_data<int64_t>();
    // In uint64, whose wrap-around gives the exact value: each one lies between first and last,
    // though i·stride alone may not fit in int64.
    for (int64_t i = 0; i < out.numel(); ++i)
      values[i] = static_cast<int64_t>(static_cast<uint64_t>(first) + static_cast<uint64_t>(i) * static_cast<uint64_t>(stride));
    return out;
  }
  check(step.floating > 0 ? end.floating >= start.floating : end.floating <= start.floating, "arange", wrong_sign());
  const double count = std::ceil((end.floating - start.floating) / step.floating);
  check(count >= 0 && count <= 0x1p62, "arange", "invalid size, possible overflow: ", start.floating, " -> ",
        end.floating, " with step ", step.floating);
  Tensor out = make_tensor({static_cast<int64_t>(count)}, out_dtype, "arange");
  if (out_dtype == kBFloat16) {
    // bfloat16's accumulation type is float. PyTorch 1.13's kernel (AVX2's 16-lane bfloat16
    // vectors, two per step) rounds the first element of each vector to bfloat16 and adds the
    // lanes' steps to that: element i = bf16(base + (i − v)·step) with base = bf16(start + v·step),
    // v = i rounded down to a multiple of 16; the tail past the last whole 32 is
    // bf16(start + i·step). The same bits as PyTorch (tests/fixtures/make_bfloat16_fixtures.py).
    constexpr int64_t kLanes = 16;
    const float first = static_cast<float>(start.floating), stride = static_cast<float>(step.floating);
    const int64_t n = out.numel(), vectorised = n / (2 * kLanes) * (2 * kLanes);
    BFloat16* values = out.mutable_data<BFloat16>();
    for (int64_t v = 0; v < vectorised; v += kLanes) {
      const BFloat16 base = first + stride * static_cast<float>(v);
      for (int64_t lane = 0; lane < kLanes; ++lane) values[v + lane] = base + static_cast<float>(lane) * stride;
    }
    for (int64_t i = vectorised; i < n; ++i) values[i] = first + stride * static_cast<float>(i);
    return out;
  }
  dispatch_floating("arange", out_dtype, [&]<typename T>() {
    T* values = out.mutable_data<T>();
    for (int64_t i = 0; i < out.numel(); ++i)
      values[i] = static_cast<T>(start.floating + static_cast<double>(i) * step.floating);
  });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("arange");
}

// --- conversions ----------------------------------------------------------------------------------

Tensor Tensor::to(DType target) const try {
  check(defined(), "to", "undefined tensor");
  if (target == dtype()) return *this;
  Tensor out = make_tensor(shape(), target, "to");
  if (dtype() == kFloat32 && target == kBFloat16) {
    // The conversions of every bfloat16 op's route through float32: the vectorised rows, in chunks.
    const float* in = data<float>();
    BFloat16* result = out.mutable_data<BFloat16>();
    detail::parallel_for(numel(), detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      detail::float_to_bfloat16(in + begin, result + begin, end - begin);
    });
  } else if (dtype() == kBFloat16 && target == kFloat32) {
    const BFloat16* in = data<BFloat16>();
    float* result = out.mutable_data<float>();
    detail::parallel_for(numel(), detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
      detail::bfloat16_to_float(in + begin, result + begin, end - begin);
    });
  } else {
    detail::dispatch_all("to", dtype(), [&]<typename From>() {
      detail::dispatch_all("to", target, [&]<typename To>() {
        detail::convert_values(data<From>(), out.mutable_data<To>(), numel(), "to");
      });
    });
  }
  // Like PyTorch, a conversion to int64 or bool is not differentiable: its result is a constant.
  if (is_floating_point(target) && autograd::needs_grad(*this))
    autograd::record(out, "ToCopyBackward", {*this}, [source = dtype()](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, g.to(source));
    });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("to");
}

Tensor Tensor::clone() const try {
  check(defined(), "clone", "undefined tensor");
  Tensor out = make_tensor(shape(), dtype(), "clone");
  std::memcpy(tg::detail::impl_of(out)->storage->data, impl_.get()->storage->data, static_cast<size_t>(numel()) * element_size(dtype()));
  if (autograd::needs_grad(*this))
    autograd::record(out, "CloneBackward", {*this}, [](const Tensor& g, autograd::GradInputs& grads) { grads.set(0, g); });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("clone");
}

Tensor Tensor::detach() const try {
  check(defined(), "detach", "undefined tensor");
  return make_view(*this, shape());
} catch (...) {
  detail::rethrow_out_of_memory_as("detach");
}

// --- autograd ---------------------------------------------------------------------------------------

Tensor& Tensor::requires_grad_(bool requires_grad) {
  check(defined(), "requires_grad_", "undefined tensor");
  check(is_leaf() || requires_grad, "requires_grad_",
        "cannot turn off requires_grad on a tensor computed by an operation; use detach()");
  check(is_floating_point(dtype()) || !requires_grad, "requires_grad_", "only float32 and float64 tensors can "
        "require gradients, got a ", dtype(), " tensor of shape ", shape());
  impl_->requires_grad = requires_grad;
  // A view of this tensor may exist already: in-place writes through it must now be checked.
  if (requires_grad && impl_->storage->aliases.load() > 1) impl_->storage->grad_alias.store(true);
  return *this;
}

bool Tensor::requires_grad() const {
  const TensorImpl& impl = checked(*this, "requires_grad");
  return impl.requires_grad || impl.grad_fn != nullptr;
}

bool Tensor::is_leaf() const { return checked(*this, "is_leaf").grad_fn == nullptr; }

Tensor Tensor::grad() const {
  const TensorImpl& impl = checked(*this, "grad");
  const std::lock_guard lock(autograd::grad_mutex(&impl));  // a backward may be replacing it
  return impl.grad;
}

void Tensor::set_grad(const Tensor& grad) const {
  checked(*this, "set_grad");
  check(!grad.defined() || (grad.shape() == shape() && grad.dtype() == dtype()), "set_grad", "expected a ", dtype(),
        " gradient of shape ", shape(), ", got ", grad.defined() ? name(grad.dtype()) : "undefined", " ",
        grad.defined() ? grad.shape() : Shape{});
  // Both would make tensors own each other: t owning itself, or t -> g -> ... -> t (a cycle can
  // only close through a gradient that already has one).
  if (grad.defined()) {
    check(tg::detail::impl_of(grad) != impl_.get(), "set_grad", "a tensor (shape ", shape(),
          ") cannot be its own gradient; pass a copy: t.set_grad(t.detach().clone())");
    check(!grad.grad().defined(), "set_grad", "the gradient (shape ", grad.shape(),
          ") has a gradient of its own; pass a tensor without one (e.g. g.detach())");
  }
  Tensor previous;  // released after the lock: it may be the last handle to a large buffer
  const std::lock_guard lock(autograd::grad_mutex(impl_.get()));
  previous = std::exchange(impl_->grad, grad);
}

HookHandle Tensor::register_hook(std::function<Tensor(const Tensor& grad)> hook) const {
  check(defined(), "register_hook", "undefined tensor");
  check(requires_grad(), "register_hook", "cannot register a hook on a tensor (shape ", shape(),
        ") that does not require grad");
  check(static_cast<bool>(hook), "register_hook", "empty hook function");
  autograd::OutputHooks& hooks = impl_->grad_fn ? impl_->grad_fn->hooks_of(impl_->output_nr)
                                                : autograd::grad_accumulator(*this).hooks_of(0);
  return autograd::add_hook(hooks.hooks, autograd::GradHook(std::move(hook)));
}

Tensor& Tensor::retain_grad() {
  check(defined(), "retain_grad", "undefined tensor");
  check(requires_grad(), "retain_grad", "cannot retain the gradient of a tensor (shape ", shape(),
        ") that does not require grad");
  if (impl_->grad_fn) impl_->grad_fn->hooks_of(impl_->output_nr).retains_grad = impl_;
  return *this;
}

bool Tensor::retains_grad() const {
  const TensorImpl& impl = checked(*this, "retains_grad");
  if (!impl.grad_fn || impl.grad_fn->output_hooks.size() <= impl.output_nr) return false;
  return impl.grad_fn->output_hooks[impl.output_nr].retains_grad.lock().get() == &impl;
}

uint32_t Tensor::output_nr() const { return checked(*this, "output_nr").output_nr; }

HookHandle Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor& leaf)> hook) const {
  check(defined(), "register_post_accumulate_grad_hook", "undefined tensor");
  check(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook",
        "only a leaf that requires grad accumulates a gradient; got a tensor of shape ", shape(),
        is_leaf() ? " that does not require grad" : " computed by an operation");
  check(static_cast<bool>(hook), "register_post_accumulate_grad_hook", "empty hook function");
  return autograd::add_hook(autograd::grad_accumulator(*this).post_accumulate_hooks,
                            autograd::PostAccumulateHook(std::move(hook)));
}

const char* Tensor::grad_fn_name() const {
  const TensorImpl& impl = checked(*this, "grad_fn_name");
  return impl.grad_fn ? impl.grad_fn->name : nullptr;
}

namespace {
// Memory exhaustion anywhere in a backward call — its arguments, the engine, a node's backward —
// leaves as tg::Error naming `op` (backward, autograd::grad) and the shape of the tensor differentiated.
template <typename Body>
auto backward_or_throw(const Shape& shape, const Body& body, const char* op = "backward") -> decltype(body()) {
  const autograd::NamedPass named(op);  // the engine's errors name `op` too
  try {
    return body();
  } catch (const detail::OutOfMemoryError& error) {  // a tensor, or an op called by a node's backward
    throw detail::OutOfMemoryError(op, error.what_failed());
  } catch (const std::bad_alloc&) {
    throw detail::OutOfMemoryError(
        op, detail::concat("out of memory while back-propagating from a tensor of shape ", shape));
  }
}

// The seed of backward() on a one-element tensor: d(self)/d(self) = 1.
Tensor implicit_seed(const Tensor& t, const char* op) {
  check(t.numel() == 1, op, "grad can be implicitly created only for a one-element output, got shape ", t.shape(),
        "; pass a grad_output of that shape");
  return ones(t.shape(), t.dtype());
}

// Checks that the tensors to differentiate are in the graph and their seeds match them; empty
// seeds mean one-element outputs seeded with 1.
std::vector<Tensor> checked_seeds(const std::vector<Tensor>& outputs, const std::vector<Tensor>& seeds,
                                  const char* op) {
  check(!outputs.empty(), op, "no tensors to differentiate");
  check(seeds.empty() || seeds.size() == outputs.size(), op, "got ", seeds.size(), " gradients for ",
        outputs.size(), " tensors");
  std::vector<Tensor> checked;
  checked.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& output = outputs[i];
    check(output.defined(), op, "tensor ", i, " is undefined");
    check(output.requires_grad(), op, "tensor ", i, " (shape ", output.shape(),
          ") does not require grad and does not have a grad_fn");
    if (seeds.empty() || !seeds[i].defined()) {
      checked.push_back(implicit_seed(output, op));
      continue;
    }
    const Tensor& seed = seeds[i];
    check(seed.shape() == output.shape() && seed.dtype() == output.dtype(), op, "grad_output ", i, " of shape ",
          seed.shape(), " (", seed.dtype(), ") does not match the output of shape ", output.shape(), " (",
          output.dtype(), ")");
    // A recorded pass differentiates through the seed too; otherwise it is data.
    checked.push_back(seed.requires_grad() && is_grad_enabled() ? seed : seed.detach());
  }
  return checked;
}

autograd::PassOptions pass_options(const BackwardOptions& options) {
  return {.keep_graph = options.retain_graph.value_or(options.create_graph),
          .create_graph = options.create_graph,
          .targets = options.inputs,
          .accumulate_targets = true};
}
}  // namespace

void Tensor::backward() const {
  check(defined(), "backward", "undefined tensor");
  // The seed is ours alone: hand it to the engine without the detached view backward(g) makes.
  backward_or_throw(shape(), [&] {
    const Tensor seed = implicit_seed(*this, "backward");
    autograd::run_backward({this, 1}, {&seed, 1}, {});
  });
}

void Tensor::backward(const Tensor& grad_output) const {
  check(defined() && grad_output.defined(), "backward", "undefined tensor");
  check(grad_output.shape() == shape() && grad_output.dtype() == dtype(), "backward", "grad_output of shape ",
        grad_output.shape(), " (", grad_output.dtype(), ") does not match the output of shape ", shape(), " (",
        dtype(), ")");
  backward_or_throw(shape(), [&] {
    const Tensor seed = grad_output.detach();
    autograd::run_backward({this, 1}, {&seed, 1}, {});
  });
}

void Tensor::backward(const BackwardOptions& options) const {
  check(defined(), "backward", "undefined tensor");
  backward_or_throw(shape(), [&] { autograd::backward({*this}, {}, options); });
}

void Tensor::backward(const Tensor& grad_output, const BackwardOptions& options) const {
  check(defined() && grad_output.defined(), "backward", "undefined tensor");
  backward_or_throw(shape(), [&] { autograd::backward({*this}, {grad_output}, options); });
}

namespace autograd {

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              const BackwardOptions& options) {
  const Shape shape = !tensors.empty() && tensors[0].defined() ? tensors[0].shape() : Shape{};
  backward_or_throw(shape, [&] {
    const std::vector<Tensor> seeds = checked_seeds(tensors, grad_tensors, "backward");
    for (size_t i = 0; i < options.inputs.size(); ++i)
      check(options.inputs[i].defined() && options.inputs[i].requires_grad(), "backward", "inputs[", i, "]",
            options.inputs[i].defined() ? detail::concat(" (shape ", options.inputs[i].shape(), ")") : std::string(),
            " does not require grad");
    run_backward(tensors, seeds, pass_options(options));
  });
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
  const Shape shape = !outputs.empty() && outputs[0].defined() ? outputs[0].shape() : Shape{};
  return backward_or_throw(shape, [&] {
    const std::vector<Tensor> seeds = checked_seeds(outputs, grad_outputs, "autograd::grad");
    check(!inputs.empty(), "autograd::grad", "no inputs to differentiate with respect to");
    for (size_t i = 0; i < inputs.size(); ++i)
      check(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad", "inputs[", i, "]",
            inputs[i].defined() ? detail::concat(" (shape ", inputs[i].shape(), ")") : std::string(),
            " does not require grad: it is not part of any graph");
    std::vector<Tensor> grads = run_backward(outputs, seeds,
                                             {.keep_graph = options.retain_graph.value_or(options.create_graph),
                                              .create_graph = options.create_graph,
                                              .targets = inputs,
                                              .accumulate_targets = false});
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (grads[i].defined()) continue;
      check(options.allow_unused || options.materialize_grads, "autograd::grad", "inputs[", i, "] (shape ",
            inputs[i].shape(), ") was not used to compute the outputs (no gradient reached it); pass "
            "allow_unused = true to get an undefined tensor for it");
      if (options.materialize_grads) grads[i] = zeros(inputs[i].shape(), inputs[i].dtype());
    }
    return grads;
  }, "autograd::grad");
}

}  // namespace autograd

}  // namespace tg
