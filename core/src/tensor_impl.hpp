// TensorImpl and Storage: what a tg::Tensor handle points to. Private to the library.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "tapegrad/tensor.hpp"

namespace tg {

namespace autograd {
struct Node;
struct AccumulateGrad;
}
namespace detail {
struct SliceOf;  // ops/inplace.hpp
}

// A tensor's bytes. Views created by `reshape` and `detach` share it. Made only by
// allocate_storage: for small tensors the shared_ptr's control block, this header and the bytes
// (64-byte aligned) are one allocation; large tensors' bytes are a block of the buffer cache
// (memory/block_cache.hpp), which gets it back when the Storage dies.
struct Storage {
  Storage(void* data, size_t nbytes, size_t cached_capacity = 0)
      : data(data), nbytes(nbytes), cached_capacity(cached_capacity) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data;
  size_t nbytes;
  size_t cached_capacity;  // the cached block's size, or 0 when the bytes follow this header
  // Counts the in-place writes to these bytes (detail::bump_version), shared by every view: a
  // tensor saved for backward remembers it, and backward refuses a tensor whose count moved.
  uint64_t version = 0;
  // How many live tensors share these bytes as views of one another (view, reshape, unsqueeze...,
  // joined by detail::share_storage; detach() and saved tensors do not count), and whether one of
  // them took part in differentiation. An in-place op recorded on one of several such views would
  // leave the others' grad_fn stale, so it is refused (ops/inplace.cpp).
  std::atomic<int64_t> aliases{0};
  std::atomic<bool> grad_alias{false};
};

// A tensor's place in its storage's alias count (Storage::aliases): counted once, and uncounted
// when the tensor dies (TensorImpl declares it after its storage, so the storage outlives it).
struct AliasMembership {
  AliasMembership() = default;
  AliasMembership(const AliasMembership&) = delete;
  AliasMembership& operator=(const AliasMembership&) = delete;
  ~AliasMembership() {
    if (Storage* counted = storage.load()) counted->aliases.fetch_sub(1);
  }
  std::atomic<Storage*> storage{nullptr};  // the storage counted, or null
};

// A new Storage of `nbytes` uninitialised bytes; std::bad_alloc when memory runs out.
std::shared_ptr<Storage> allocate_storage(size_t nbytes);

struct TensorImpl {
  Shape shape;
  int64_t numel = 0;
  DType dtype = kFloat32;
  bool requires_grad = false;  // set on leaves by requires_grad_(); implied by grad_fn
  std::shared_ptr<Storage> storage;
  std::shared_ptr<autograd::Node> grad_fn;  // the node that produced this tensor; null for leaves
  uint32_t output_nr = 0;                   // which of grad_fn's outputs this tensor is
  // A leaf's one gradient sink, made when the leaf is first used by a recorded op.
  std::shared_ptr<autograd::AccumulateGrad> grad_accumulator;
  Tensor grad;  // accumulated gradient of a leaf; read and replaced under autograd::grad_mutex
  // Set on a result of narrow, select, slice or index (and on views of one): the tensor and region
  // it was copied from, which in-place ops write back to (ops/inplace.cpp).
  std::shared_ptr<detail::SliceOf> slice_of;
  AliasMembership alias;  // after `storage`: destroyed first

  template <typename T>
  T* data() const {
    return static_cast<T*>(storage->data);
  }
};

namespace detail {
// The library's way to a Tensor's implementation; users see only the handle (tensor.hpp).
struct TensorAccess {
  static TensorImpl* impl(const Tensor& t) { return t.impl_.get(); }
  static const std::shared_ptr<TensorImpl>& impl_ptr(const Tensor& t) { return t.impl_; }
  static Tensor wrap(std::shared_ptr<TensorImpl> impl) {
    Tensor t;
    t.impl_ = std::move(impl);
    return t;
  }
};
inline TensorImpl* impl_of(const Tensor& t) { return TensorAccess::impl(t); }
inline const std::shared_ptr<TensorImpl>& impl_ptr_of(const Tensor& t) { return TensorAccess::impl_ptr(t); }

// Marks an in-place write to t's storage (fill_, copy_, an optimizer's update...), so that a
// backward that saved t before the write refuses to use it.
inline void bump_version(const Tensor& t) { ++tg::detail::impl_of(t)->storage->version; }

// The two halves of every in-place write (ops/inplace.cpp). Before writing t's bytes:
// check_inplace throws tg::Error naming `op` where PyTorch would refuse the write (a leaf that
// requires grad while grad mode is on, or a view of one) or where it cannot be done safely (see
// Storage::aliases; the write-back of a narrow/select/slice/index result whose source changed).
// `value_requires_grad`: the value written takes part in differentiation. After writing them (and
// setting t's grad_fn when the op is recorded): finish_inplace moves the version and writes the
// region of the tensor t was sliced from, if any, recording that write too.
void check_inplace(const Tensor& t, const char* op, bool value_requires_grad);
void finish_inplace(const Tensor& t, const char* op);

// PyTorch's `t.data = source` (what Module::to does to each parameter): t keeps its identity —
// every handle to it, its gradient accumulator and hooks — and from now on holds source's storage
// and dtype. Same shape; t's grad must already be undefined or of source's dtype. Views made from
// t before (detach, reshape) keep the old storage, as in PyTorch.
inline void set_data(const Tensor& t, const Tensor& source) {
  TensorImpl* impl = impl_of(t);
  if (Storage* counted = impl->alias.storage.exchange(nullptr)) counted->aliases.fetch_sub(1);
  impl->storage = impl_of(source)->storage;
  impl->dtype = source.dtype();
  impl->slice_of.reset();  // a new tensor's bytes: they no longer stand for a region of another
}

// `view` was made from `base` sharing its storage (view, reshape, unsqueeze, ...): both count as
// aliases of it, and the view inherits the region base stands for, if any (its elements in the
// same row-major order), so that an in-place op on the view writes that region too.
void share_storage(const Tensor& base, const Tensor& view);
}  // namespace detail

// The element count of `shape`, or tg::Error naming `op` for a negative dim or an overflow.
int64_t checked_numel(const Shape& shape, const char* op);

// A new contiguous tensor with uninitialised values.
Tensor make_tensor(const Shape& shape, DType dtype, const char* op = "empty");

// A tensor sharing `storage` under a new shape (numel must match).
Tensor make_view(const Tensor& base, const Shape& shape);

// Dims normalised to [0, ndim) (negative dims count from the end), or tg::Error naming `op`.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace tg
