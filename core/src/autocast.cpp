// tg::autocast's per-thread state and its cast cache (tapegrad/autocast.hpp, autocast_policy.hpp).
#include "tapegrad/autocast.hpp"

#include <memory>
#include <unordered_map>

#include "autocast_policy.hpp"
#include "autograd/node.hpp"
#include "tapegrad/autograd.hpp"
#include "tapegrad/error.hpp"
#include "tensor_impl.hpp"

namespace tg {

namespace {

// A parameter's bfloat16 cast, made at most once per autocast region while the parameter keeps
// its value: `version` is its storage's in-place write count when cast. Two casts, as a cast made
// under a NoGradGuard is not on the tape and one made with grad mode on is.
struct CachedCast {
  std::shared_ptr<TensorImpl> source;  // held, so that no other tensor can reuse its address
  uint64_t version = 0;
  Tensor recorded;
  Tensor unrecorded;
};

struct AutocastState {
  bool enabled = false;
  bool suspended = false;
  bool cache_enabled = true;
  DType dtype = kBFloat16;
  int nesting = 0;  // guards alive, enabled or not: the cache dies with the outermost
  std::unordered_map<const TensorImpl*, CachedCast> cache;
};

thread_local AutocastState state;

// A cast that can serve again: one recorded under grad mode must still be on a tape that has not
// run its backward (a pass frees the nodes it ran; the next use records a new cast).
bool reusable(const Tensor& cast) {
  if (!cast.defined()) return false;
  const auto& grad_fn = detail::impl_of(cast)->grad_fn;
  return !grad_fn || !grad_fn->released;
}

Tensor cached_cast(const Tensor& parameter) {
  const TensorImpl* impl = detail::impl_of(parameter);
  CachedCast& entry = state.cache[impl];
  const uint64_t version = impl->storage->version;
  if (!entry.source || entry.version != version) entry = {detail::impl_ptr_of(parameter), version, {}, {}};
  Tensor& cast = is_grad_enabled() ? entry.recorded : entry.unrecorded;
  if (!reusable(cast)) cast = parameter.to(kBFloat16);
  return cast;
}

}  // namespace

autocast::autocast(const AutocastOptions& options)
    : enabled_before_(state.enabled), dtype_before_(state.dtype), cache_enabled_before_(state.cache_enabled) {
  check(options.dtype == kBFloat16, "autocast",
        "the CPU's lower precision is bfloat16 (PyTorch's CPU autocast supports only it), got ", options.dtype);
  state.enabled = options.enabled;
  state.dtype = options.dtype;
  state.cache_enabled = options.cache_enabled;
  ++state.nesting;
}

autocast::~autocast() {
  if (--state.nesting == 0) state.cache.clear();
  state.enabled = enabled_before_;
  state.dtype = dtype_before_;
  state.cache_enabled = cache_enabled_before_;
}

bool is_autocast_cpu_enabled() { return state.enabled; }
DType get_autocast_cpu_dtype() { return state.dtype; }
void clear_autocast_cache() { state.cache.clear(); }

namespace detail {

bool autocast_enabled() { return state.enabled && !state.suspended; }

AutocastSuspended::AutocastSuspended() : before_(state.suspended) { state.suspended = true; }
AutocastSuspended::~AutocastSuspended() { state.suspended = before_; }

Tensor cast_to_lower(const Tensor& t) {
  if (!t.defined() || t.dtype() != kFloat32) return t;
  // PyTorch's heuristic: cache the casts of float32 leaves that require grad — the parameters.
  if (state.cache_enabled && t.requires_grad() && t.is_leaf()) return cached_cast(t);
  return t.to(kBFloat16);
}

}  // namespace detail

}  // namespace tg
