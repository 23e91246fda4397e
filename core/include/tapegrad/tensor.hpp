/// @file
/// tg::Tensor — a dense, row-major, N-d array of float32, float64, bfloat16, int64 or bool (dtype.hpp) whose
/// operations are recorded on a tape and differentiated in reverse.
///
/// A Tensor is a cheap handle: copies share the same storage and the same autograd state, exactly
/// like torch::Tensor. Tensors are always contiguous: `reshape`, `view`, `unsqueeze`, `squeeze`,
/// `unflatten`, `flatten` and `detach` share storage with their input, every other operation
/// returns new storage.
///
/// @code
///   tg::manual_seed(0);
///   tg::Tensor w = tg::randn({3, 2}).requires_grad_();
///   tg::Tensor x = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
///   tg::Tensor loss = tg::matmul(x, w).relu().pow(2).mean();
///   loss.backward();
///   std::cout << w.grad();
/// @endcode
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tapegrad/autograd.hpp"
#include "tapegrad/dtype.hpp"
#include "tapegrad/error.hpp"
#include "tapegrad/generator.hpp"  // tg::Generator and tg::manual_seed, behind the random functions

/// tapegrad's public API: tensors and their operations, autograd, and (in nested namespaces) the
/// modules, optimizers, data loading and distributed training built on them.
namespace tg {

struct TensorImpl;  // the library's own: core/src/tensor_impl.hpp, not installed
namespace detail {
struct TensorAccess;
}
struct BackwardOptions;

/// libtorch's tensor indexing (at::indexing): Python's `x[...]` written in C++. Each entry of the
/// list given to Tensor::index and Tensor::index_put_ is an integer (that dim removed; negative
/// counts from the end), a Slice, None (a new dim of size 1) or Ellipsis (every dim not otherwise
/// indexed): `x.index({0, Slice(1, None), None, Ellipsis})` is `x[0, 1:, None, ...]`.
namespace indexing {
/// start:stop:step along one dim, each part optional, with Python's rules: negative start and stop
/// count from the end, both are clamped to [0, size], step > 0 (default 1).
struct Slice {
  /// Slice(), Slice(start), Slice(start, stop), Slice(start, stop, step); None (or std::nullopt) for a default.
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start;  ///< first element (default 0)
  std::optional<int64_t> stop;   ///< one past the last (default the size)
  std::optional<int64_t> step;   ///< default 1
};
/// The type of Ellipsis.
struct EllipsisIndexType {
  explicit constexpr EllipsisIndexType() = default;  ///< only Ellipsis itself
};
inline constexpr EllipsisIndexType Ellipsis{};  ///< `...`: as many whole dims as the other entries leave
inline constexpr std::nullopt_t None = std::nullopt;  ///< a new dim of size 1 (also a Slice's default)
/// One entry of an index list: built implicitly from an integer, a Slice, None or Ellipsis.
class TensorIndex {
 public:
  /// What the entry is.
  enum class Kind {
    kInteger,  ///< an integer: that dim removed
    kSlice,    ///< a Slice of one dim
    kNone,     ///< None: a new dim of size 1
    kEllipsis  ///< Ellipsis: the dims no other entry takes
  };
  /// An integer index: that dim is removed (any integer type but bool).
  template <std::integral Integer>
    requires(!std::same_as<Integer, bool>)
  TensorIndex(Integer index) : kind_(Kind::kInteger), integer_(static_cast<int64_t>(index)) {}
  TensorIndex(Slice slice) : kind_(Kind::kSlice), slice_(slice) {}      ///< a slice of one dim
  TensorIndex(std::nullopt_t) : kind_(Kind::kNone) {}                   ///< None: a new dim of size 1
  TensorIndex(EllipsisIndexType) : kind_(Kind::kEllipsis) {}            ///< Ellipsis
  Kind kind() const { return kind_; }                ///< which of the four it is
  int64_t integer() const { return integer_; }       ///< the index, for kInteger
  const Slice& slice() const { return slice_; }      ///< the slice, for kSlice

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
};
}  // namespace indexing

/// A dense, row-major, N-d array of float32, float64, bfloat16, int64 or bool whose operations are recorded
/// on a tape; a cheap handle whose copies share storage and autograd state, like torch::Tensor.
class Tensor {
 public:
  Tensor() = default;  ///< an undefined tensor, e.g. the grad() of a parameter before any backward

  bool defined() const { return impl_ != nullptr; }  ///< false for an undefined (default-constructed) tensor
  const Shape& shape() const;                          ///< the size of each dim
  int64_t size(int64_t dim) const;  ///< negative dims count from the end
  int64_t dim() const;    ///< the number of dims (0 for a scalar)
  int64_t numel() const;  ///< the number of elements
  DType dtype() const;    ///< the element type

  // --- element access (no autograd) ---
  double item() const;  ///< the value of a one-element tensor
  template <typename T>
  T item() const;  ///< float, double, tg::BFloat16, int64_t or bool, converted as .to() converts
  template <typename T>
  std::vector<T> to_vector() const;  ///< row-major copy; T must match dtype()
  template <typename T>
  const T* data() const;  ///< T must match dtype()
  template <typename T>
  T* mutable_data();  ///< for kernels, initialisers and optimizers; bypasses the tape

  // --- in-place initialisation (not recorded; refused on a tensor that requires grad unless a
  // NoGradGuard is alive, as in PyTorch). The random ones draw PyTorch's numbers from `generator`,
  // or from the default generator (tg::manual_seed) when it is null ---
  Tensor& fill_(double value);            ///< every element set to value
  Tensor& zero_() { return fill_(0.0); }  ///< every element set to 0
  Tensor& uniform_(double low = 0.0, double high = 1.0, Generator* generator = nullptr);  ///< from U[low, high)
  Tensor& normal_(double mean = 0.0, double stddev = 1.0, Generator* generator = nullptr);  ///< from N(mean, stddev²)
  Tensor& bernoulli_(double p = 0.5, Generator* generator = nullptr);  ///< 1 with probability p, else 0
  Tensor& copy_(const Tensor& source);  ///< same shape and dtype

  // --- in-place arithmetic and assignment (recorded on the tape, PyTorch's rules). Refused on a
  // leaf that requires grad while grad mode is on (optimizers write under a NoGradGuard); on any
  // other tensor the op becomes its grad_fn, and the storage's version moves, so that a backward
  // that saved the old values refuses to run. fill_, zero_ and copy_ above follow the same rules.
  // On a result of narrow, select, slice or index the write also reaches the region of the tensor
  // it was taken from (see docs/api/tensor.md, "Indexing and in-place arithmetic") ---
  /// this += alpha · other; other broadcasts to this tensor's shape, same floating dtype.
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double other);  ///< this += other
  /// this −= alpha · other; other broadcasts to this tensor's shape, same floating dtype.
  Tensor& sub_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(double other);        ///< this −= other
  Tensor& mul_(const Tensor& other);  ///< this ·= other (broadcast to this tensor's shape)
  Tensor& mul_(double other);        ///< this ·= other
  Tensor& div_(const Tensor& other);  ///< this /= other (broadcast to this tensor's shape)
  Tensor& div_(double other);        ///< this /= other
  /// add_, sub_, mul_ and div_ as operators: `x.index({0, Slice(0, 2)}) += 3`.
  ///@{
  Tensor& operator+=(const Tensor& other) { return add_(other); }
  Tensor& operator+=(double other) { return add_(other); }
  Tensor& operator-=(const Tensor& other) { return sub_(other); }
  Tensor& operator-=(double other) { return sub_(other); }
  Tensor& operator*=(const Tensor& other) { return mul_(other); }
  Tensor& operator*=(double other) { return mul_(other); }
  Tensor& operator/=(const Tensor& other) { return div_(other); }
  Tensor& operator/=(double other) { return div_(other); }
  ///@}
  /// Python's `x[indices] = value`: the region `index(indices)` selects is overwritten with value,
  /// broadcast to the region's shape (same dtype). Recorded: the gradient to the old values is the
  /// incoming one with the region zeroed, to value the region's gradient summed back to its shape.
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
  /// `x[indices] = value` for a number, converted to this tensor's dtype (any dtype).
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double value);
  Tensor(const Tensor&) = default;             ///< another handle to the same tensor
  Tensor(Tensor&&) noexcept = default;         ///< the handle moved
  Tensor& operator=(const Tensor&) & = default;      ///< rebinds this handle (shares, copies nothing)
  Tensor& operator=(Tensor&&) & noexcept = default;  ///< rebinds this handle
  /// Assigning to a temporary copies values into it, as in libtorch: `x.index({0}) = y` is
  /// `x.index({0}).copy_(y)` (y broadcast to the region) and `x.narrow(0, 1, 2) = 0` fills.
  ///@{
  Tensor& operator=(const Tensor& source) &&;
  Tensor& operator=(double value) &&;
  ///@}

  // --- autograd ---
  Tensor& requires_grad_(bool requires_grad = true);  ///< float leaves only
  bool requires_grad() const;  ///< whether operations on this tensor are recorded for its gradient
  bool is_leaf() const;  ///< created by the user, not by a recorded operation
  /// Undefined until a backward reaches this leaf; accumulates until reset. Safe to call from any
  /// thread, even while a backward runs: it returns the gradient before or after an accumulation,
  /// never a half-written one (a stored gradient is never modified, only replaced).
  Tensor grad() const;
  /// Replaces the gradient: same shape and dtype, or undefined to reset. Neither the tensor itself
  /// nor a tensor that has a gradient of its own (either would let tensors own each other).
  /// Callable on a const handle, like PyTorch's `.grad =`: the gradient belongs to the tensor that
  /// every handle refers to, not to the handle.
  void set_grad(const Tensor& grad) const;
  void backward() const;              ///< on a one-element tensor: d(self)/d(self) = 1
  void backward(const Tensor& grad_output) const;  ///< vector-Jacobian product with grad_output
  /// backward() with torch.Tensor.backward's keyword arguments (retain_graph, create_graph,
  /// inputs): `loss.backward({.create_graph = true})`.
  void backward(const BackwardOptions& options) const;
  /// backward(grad_output) with torch.Tensor.backward's keyword arguments.
  void backward(const Tensor& grad_output, const BackwardOptions& options) const;
  /// A non-leaf keeps the gradient backward computes for it in grad() (accumulating, as a leaf
  /// does); on a leaf nothing changes (leaves keep theirs anyway). torch.Tensor.retain_grad.
  Tensor& retain_grad();
  bool retains_grad() const;  ///< whether retain_grad() was called on this non-leaf
  /// Which output of its grad_fn this tensor is (0 for ops with one output, and for leaves).
  uint32_t output_nr() const;
  Tensor detach() const;  ///< shares storage, cut from the tape
  const char* grad_fn_name() const;  ///< name of the recording op, or nullptr for leaves

  // --- hooks (torch.Tensor.register_hook, register_post_accumulate_grad_hook) ---
  /// `hook(grad)` runs when backward has computed this tensor's gradient, before it is used (or, on
  /// a leaf, accumulated into grad()); it may return a replacement of the same shape and dtype, or
  /// an undefined Tensor to keep it. Hooks run in the order they were registered.
  HookHandle register_hook(std::function<Tensor(const Tensor& grad)> hook) const;
  /// Leaves only: `hook(leaf)` runs once per backward, right after leaf.grad() received its final
  /// gradient of that pass (data-parallel training starts its all-reduce here, while backward goes on).
  HookHandle register_post_accumulate_grad_hook(std::function<void(const Tensor& leaf)> hook) const;

  // --- operations (all recorded on the tape) ---
  /// Returns *this when the dtype already matches. float → int64 truncates toward zero and refuses
  /// NaN, ±inf and out-of-range values; → bool is `!= 0`. Only float → float is recorded on the tape.
  Tensor to(DType dtype) const;
  Tensor clone() const;  ///< a copy in new storage (recorded: the gradient flows back)
  /// Of all elements, 0-d. As in PyTorch, a bool or int64 tensor sums to int64, exactly, wrapping
  /// around on overflow: `(pred == y).sum().item<int64_t>()` counts the matches.
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;  ///< over dims, kept as size 1 if keepdim
  /// Of all elements, 0-d; float32 and float64 only (tg::Error naming the cast for int64 and bool).
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;  ///< over dims, kept as size 1 if keepdim
  /// The product of all elements, 0-d (1 for an empty tensor), as torch.prod: bool and int64 give
  /// int64 (wrapping around on overflow), float32 and float64 their own dtype, accumulated in
  /// double. The gradient is the product of the other elements, exact with zeros in the input (no
  /// division); twice differentiable.
  Tensor prod() const;
  /// The product along dim (size 1 kept if keepdim), as torch.prod(x, dim, keepdim).
  Tensor prod(int64_t dim, bool keepdim = false) const;
  /// Running sums along dim, out[k] = x[0] + ... + x[k], as torch.cumsum: bool and int64 give int64,
  /// float32 and float64 their own dtype, accumulated in double in order (as PyTorch's CPU kernel).
  /// The gradient is the running sum from the other end; differentiable to any order.
  Tensor cumsum(int64_t dim) const;
  /// Running products along dim, out[k] = x[0] · ... · x[k], as torch.cumprod (dtypes as cumsum).
  /// The gradient is exact with zeros in the input (no division); twice differentiable.
  Tensor cumprod(int64_t dim) const;
  Tensor var() const;  ///< of all elements, unbiased
  /// x.var(false): the biased variance of all elements. A template taking exactly bool, so that
  /// x.var({1}) cannot silently bind here (the braced list means dims, the overload below).
  template <std::same_as<bool> Bool>
  Tensor var(Bool unbiased) const {
    return var(std::vector<int64_t>{}, unbiased, false);
  }
  Tensor var(const std::vector<int64_t>& dims, bool unbiased = true, bool keepdim = false) const;  ///< over dims
  Tensor sqrt() const;                ///< √x elementwise
  /// 1 / √x elementwise, as torch.rsqrt (float32, float64): +inf at 0, NaN below 0. The gradient
  /// is −½ g · rsqrt(x)³.
  Tensor rsqrt() const;
  Tensor pow(double exponent) const;  ///< x^exponent elementwise
  /// x^exponent elementwise with broadcasting, as torch.pow(Tensor, Tensor): both of one dtype
  /// (float32, float64). Gradients to both, as PyTorch's: to x, g · e · x^(e−1) (0 where e = 0);
  /// to the exponent, g · x^e · log(x) (0 where x = 0 and e >= 0, and NaN where x < 0).
  Tensor pow(const Tensor& exponent) const;
  Tensor exp() const;                 ///< e^x elementwise
  Tensor log() const;                 ///< natural logarithm elementwise
  Tensor relu() const;                ///< max(x, 0) elementwise
  // --- elementwise math, comparisons and selection (PyTorch's semantics and gradients) ---
  Tensor log1p() const;    ///< log(1 + x) elementwise, accurate for small x
  Tensor tanh() const;     ///< tanh elementwise
  Tensor sigmoid() const;  ///< 1 / (1 + e^−x) elementwise
  Tensor gelu(std::string_view approximate = "none") const;  ///< "none" (erf) or "tanh"
  Tensor erf() const;                                        ///< the error function, as torch.erf
  Tensor abs() const;                                        ///< gradient 0 at 0
  /// Trigonometric and hyperbolic functions elementwise, as torch.sin, cos, tan, asin, acos, atan,
  /// sinh and cosh: float32 and float64, and int64 or bool tensors computed as float32 (PyTorch
  /// promotes integers to its default float dtype). NaN outside the domain (asin and acos of
  /// |x| > 1, sin of ±inf). Gradients as PyTorch's: sin′ = cos, cos′ = −sin, tan′ = 1 + tan²,
  /// asin′ = 1/√(1 − x²), acos′ = −1/√(1 − x²), atan′ = 1/(1 + x²), sinh′ = cosh, cosh′ = sinh.
  ///@{
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor sinh() const;
  Tensor cosh() const;
  ///@}
  /// 2^x, log₂ x, log₁₀ x and e^x − 1 (accurate for small x) elementwise, as torch.exp2, log2, log10
  /// and expm1; dtypes as sin (int64 and bool computed as float32); log of x < 0 is NaN, of 0 −inf.
  ///@{
  Tensor exp2() const;
  Tensor log2() const;
  Tensor log10() const;
  Tensor expm1() const;
  ///@}
  /// The largest integer <= x and the smallest >= x elementwise, as torch.floor and torch.ceil:
  /// float32 and float64 (±0, ±inf and NaN unchanged), int64 returned as a copy. Gradient 0.
  ///@{
  Tensor floor() const;
  Tensor ceil() const;
  ///@}
  /// x rounded to the nearest integer, halves to even (0.5 → 0, 1.5 → 2, −2.5 → −2), as
  /// torch.round; with `decimals` as torch.round(x, decimals=d): round(x · 10^d) / 10^d, or
  /// round(x / 10^−d) · 10^−d for d < 0. float32 and float64; int64 returned as a copy (decimals = 0
  /// only). Gradient 0.
  Tensor round(int64_t decimals = 0) const;
  /// −1, 0 or 1 by the sign of x, as torch.sign: float32, float64 and int64 keep their dtype (±0 and
  /// NaN give 0), bool is returned as a copy. Gradient 0.
  Tensor sign() const;
  /// atan2(this, other) elementwise, the angle of the point (other, this) in (−π, π], as torch.atan2:
  /// broadcasting, the operands promoted to one dtype and int64/bool computed as float32. Gradients
  /// as PyTorch's: g · other / (this² + other²) to this, −g · this / (this² + other²) to other, each
  /// summed back to its operand's shape.
  Tensor atan2(const Tensor& other) const;
  /// The remainder of this / other with the quotient truncated toward zero (the sign of this), as
  /// torch.fmod, and with the quotient floored (the sign of other, Python's %), as torch.remainder:
  /// broadcasting, the operands promoted to one dtype (float32, float64, int64; bool with bool is
  /// refused). A float remainder by 0 is NaN; an int64 one throws tg::Error "ZeroDivisionError", as
  /// PyTorch's RuntimeError does. Gradients as PyTorch's: g to this, −g · trunc(this / other)
  /// (fmod) or −g · floor(this / other) (remainder) to other.
  ///@{
  Tensor fmod(const Tensor& other) const;
  Tensor remainder(const Tensor& other) const;
  ///@}
  /// x.fmod(number) and x.remainder(number), typed as PyTorch types a Scalar: a float tensor keeps
  /// its dtype (the number rounded to it); an int64 (or bool) tensor stays int64 for an integer and
  /// becomes float32 for a floating-point number: `counts.remainder(7)` is int64, `x.fmod(2.5)`
  /// keeps x's float dtype.
  ///@{
  template <typename Number>
    requires((std::integral<Number> || std::floating_point<Number>) && !std::same_as<Number, bool>)
  Tensor fmod(Number other) const {
    return modulo_by(/*floored=*/false, other);
  }
  template <typename Number>
    requires((std::integral<Number> || std::floating_point<Number>) && !std::same_as<Number, bool>)
  Tensor remainder(Number other) const {
    return modulo_by(/*floored=*/true, other);
  }
  ///@}

 private:
  // fmod (floored = false) or remainder by a number, which PyTorch types as an integer (`integral`:
  // exactly `integer`) or a floating-point number `floating`; behind the templates above.
  Tensor modulo_by(bool floored, bool integral, int64_t integer, double floating) const;
  template <typename Number>
  Tensor modulo_by(bool floored, Number other) const {
    if constexpr (std::floating_point<Number>) {
      return modulo_by(floored, false, 0, static_cast<double>(other));
    } else {
      if constexpr (std::is_unsigned_v<Number>)
        check(other <= static_cast<std::make_unsigned_t<int64_t>>(INT64_MAX), floored ? "remainder" : "fmod",
              "the integer ", other, " is outside int64's range");
      return modulo_by(floored, true, static_cast<int64_t>(other), static_cast<double>(other));
    }
  }

 public:
  /// min(max(x, min), max), either bound optional (not both absent); gradient where min <= x <= max.
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  /// min(max(x, min), max) with tensor bounds, as torch.clamp(Tensor, Tensor?, Tensor?): x and the
  /// given bounds (at least one, of x's dtype) broadcast together; a NaN in any of them gives NaN.
  /// Gradient to x where min <= x <= max; to min where x < min (and min < max); to max where
  /// x > max (or max < min): PyTorch's rules, each summed back to its operand's shape.
  Tensor clamp(const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt) const;
  Tensor clamp_min(double min) const;  ///< clamp(min, std::nullopt)
  Tensor clamp_max(double max) const;  ///< clamp(std::nullopt, max)
  /// Elementwise max/min with broadcasting; NaN wins; at a tie each side gets half the gradient.
  ///@{
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  ///@}
  /// value where mask (bool, broadcast together with this tensor) is true; gradient where it is false.
  Tensor masked_fill(const Tensor& mask, double value) const;
  /// Comparisons to kBool with broadcasting, any dtypes (promoted: bool < int64 < float32 < float64);
  /// a scalar is rounded to a float tensor's dtype first. Also as the operators == != < <= > >=.
  ///@{
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(double other) const;
  Tensor lt(double other) const;
  Tensor le(double other) const;
  Tensor gt(double other) const;
  Tensor ge(double other) const;
  ///@}
  /// torch.var/torch.std(dim, correction=c, keepdim): divide by max(n - c, 0). Any number but a
  /// bool (a bool is `unbiased`, the overloads above): x.var({1}, 0, true) is the population variance.
  template <typename Number>
    requires((std::integral<Number> || std::floating_point<Number>) && !std::same_as<Number, bool>)
  Tensor var(const std::vector<int64_t>& dims, Number correction, bool keepdim = false) const {
    return variance(dims, static_cast<double>(correction), keepdim, /*standard_deviation=*/false);
  }
  Tensor std() const;  ///< of all elements, unbiased
  /// x.std(false): the biased standard deviation of all elements (exactly bool, as var(Bool)).
  template <std::same_as<bool> Bool>
  Tensor std(Bool unbiased) const {
    return std(std::vector<int64_t>{}, unbiased, false);
  }
  Tensor std(const std::vector<int64_t>& dims, bool unbiased = true, bool keepdim = false) const;  ///< over dims
  /// The square root of var(dims, correction, keepdim).
  template <typename Number>
    requires((std::integral<Number> || std::floating_point<Number>) && !std::same_as<Number, bool>)
  Tensor std(const std::vector<int64_t>& dims, Number correction, bool keepdim = false) const {
    return variance(dims, static_cast<double>(correction), keepdim, /*standard_deviation=*/true);
  }

 private:
  // var, or std (its square root), dividing by max(n - correction, 0): behind every var/std overload.
  Tensor variance(const std::vector<int64_t>& dims, double correction, bool keepdim, bool standard_deviation) const;

 public:
  Tensor matmul(const Tensor& other) const;  ///< tg::matmul(*this, other)
  Tensor bmm(const Tensor& other) const;     ///< tg::bmm(*this, other)
  /// tg::baddbmm(*this, batch1, batch2, beta, alpha): β·this + α·(batch1 · batch2).
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, double beta = 1.0, double alpha = 1.0) const;
  Tensor reshape(const Shape& shape) const;  ///< one dim may be -1
  Tensor transpose(int64_t dim0, int64_t dim1) const;  ///< dims dim0 and dim1 swapped

  // --- views, slicing and triangles (PyTorch's names and arguments; negative dims count from the
  // end). Tensors are always contiguous: view, unsqueeze, squeeze, unflatten and flatten (like
  // reshape) share storage with their input, so a write through one is seen by the other and an
  // in-place write through either invalidates a tensor saved for backward from the other; permute,
  // expand, narrow, select, slice and t copy in one parallel pass (PyTorch returns strided views).
  // A narrow, select, slice or index result remembers where it came from: an in-place op on it
  // (copy_, fill_, add_, index_put_, ...) also writes that region of its input ---
  /// The same elements under `shape` (one dim may be -1), sharing storage: x.view({B, T, H, D}).
  Tensor view(const Shape& shape) const;
  /// A dim of size 1 inserted at `dim`, in [-dim() - 1, dim()]; shares storage.
  Tensor unsqueeze(int64_t dim) const;
  /// Every dim of size 1 removed; shares storage.
  Tensor squeeze() const;
  /// Dim `dim` removed if its size is 1 (otherwise the same shape, as PyTorch); shares storage.
  Tensor squeeze(int64_t dim) const;
  /// Dim `dim` split into `sizes` (one may be -1; their product is size(dim)); shares storage:
  /// a [B, T, 3·E] tensor's unflatten(2, {3, H, D}) is [B, T, 3, H, D].
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  /// Dims start_dim..end_dim merged into one, as torch.flatten (a 0-d tensor becomes [1]); shares storage.
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// This tensor itself: a tapegrad tensor is always contiguous, so there is nothing to copy.
  Tensor contiguous() const { return *this; }
  /// The dims reordered, out.shape[i] = shape[dims[i]] (a permutation of every dim); a copy.
  Tensor permute(const std::vector<int64_t>& dims) const;
  /// Size-1 dims repeated to `sizes` (-1 keeps a dim; extra sizes add leading dims), as
  /// torch.Tensor.expand; a copy. Its gradient sums over the repeated dims.
  Tensor expand(const Shape& sizes) const;
  /// Elements [start, start + length) along dim (start may be negative, counted from the end); a
  /// copy that remembers its region: an in-place op on it writes this tensor's region too.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Element `index` along dim, that dim removed (a negative index counts from the end); a copy
  /// that writes back, as narrow's.
  Tensor select(int64_t dim, int64_t index) const;
  /// x[start:end:step] along dim, as libtorch's Tensor::slice: start defaults to 0 and end to the
  /// size, negative ones count from the end, both are clamped to [0, size]; step > 0. A copy that
  /// writes back, as narrow's.
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  /// Python's `x[indices]` with libtorch's tg::indexing entries (integers, Slice, None, Ellipsis),
  /// built from select, slice and unsqueeze: `x.index({i, 0, Slice(r, r + 4)})`. A copy that
  /// remembers its region of x: an in-place op on it writes the region too.
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  /// The transpose of a 2-D tensor (a copy); a 0-d or 1-D tensor unchanged (as a copy).
  Tensor t() const;
  /// The lower (upper) triangle of the last two dims, any leading batch dims: element (i, j) kept
  /// where j − i <= diagonal (tril) or j − i >= diagonal (triu), 0 elsewhere. Any dtype; the
  /// gradient is masked the same way.
  ///@{
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  ///@}

  // --- softmax family, selection, joining and indexing (ops over one dim; PyTorch's semantics) ---
  Tensor softmax(int64_t dim) const;      ///< exp(x) / Σ exp(x) along dim, max-shifted
  Tensor log_softmax(int64_t dim) const;  ///< x − logsumexp(x) along dim
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;  ///< no dims: all
  struct ValuesAndIndices;
  /// x.max(dim) and x.min(dim): the values and their int64 indices along dim (the first of ties),
  /// as torch.max(x, dim, keepdim): `auto [values, indices] = x.max(1);`. Defined below the class.
  ///@{
  ValuesAndIndices max(int64_t dim, bool keepdim = false) const;
  ValuesAndIndices min(int64_t dim, bool keepdim = false) const;
  ///@}
  /// The largest (smallest) of all elements, 0-d; the gradient is shared evenly among ties.
  ///@{
  Tensor max() const;
  Tensor min() const;
  ///@}
  /// The indices of the largest (smallest) values along dim, int64.
  ///@{
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  ///@}
  /// The index of the largest (smallest) element in the flattened tensor, 0-d int64.
  ///@{
  Tensor argmax() const;
  Tensor argmin() const;
  ///@}
  /// The elements of every line along dim in order, and where each came from (int64), as
  /// torch.sort(x, dim, descending, stable=True): equal values keep their order (the lower index
  /// first, in both directions), NaN sorts above every number and −0 equals +0. float32, float64
  /// and int64; the values' gradient goes back to the positions they came from.
  ValuesAndIndices sort(int64_t dim = -1, bool descending = false) const;
  /// sort(dim, descending).indices alone, as torch.argsort (stable).
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  /// The k largest (largest = false: smallest) elements of every line along dim and their int64
  /// indices, as torch.topk; dim's size becomes k (0 <= k <= size). The result is always in sorted
  /// order (sorted = false is accepted and gives the same), and ties are taken lower index first:
  /// topk(k) is exactly the first k of sort(dim, descending = largest), where PyTorch leaves the
  /// order of equal values unspecified. NaN counts as the largest value. Values are differentiable.
  ValuesAndIndices topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  /// tg::multinomial(*this, num_samples, replacement, generator): int64 category indices drawn
  /// with probabilities proportional to this 1-D or 2-D tensor's rows.
  Tensor multinomial(int64_t num_samples, bool replacement = false, Generator* generator = nullptr) const;
  /// Pieces along dim: of split_size each (the last may be smaller), or of the given sizes ({2, 3}
  /// is a list of sizes), or `chunks` pieces as torch.chunk. Each piece is a new tensor.
  ///@{
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> split(std::initializer_list<int64_t> split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  ///@}
  Tensor index_select(int64_t dim, const Tensor& index) const;  ///< index: int64 [n]
  Tensor gather(int64_t dim, const Tensor& index) const;        ///< index: int64, x's number of dims
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;  ///< out of place

  /// torch::Tensor::is_same: both handles refer to one tensor (not merely equal values).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// How many handles refer to this tensor (0 for an undefined one), as torch::Tensor::use_count.
  long use_count() const { return impl_.use_count(); }

 private:
  friend struct detail::TensorAccess;  // the library's kernels reach the TensorImpl through it
  std::shared_ptr<TensorImpl> impl_;
};

/// torch.Tensor.backward's keyword arguments, for Tensor::backward and tg::autograd::backward.
struct BackwardOptions {
  /// Keep what the graph saved so that it can be differentiated through again. Defaults to
  /// create_graph (as in PyTorch); without it a second backward through the graph is an error.
  std::optional<bool> retain_graph{};
  /// Record the backward pass itself, so that the gradients it computes (a leaf's grad() included)
  /// have a grad_fn and can be differentiated again: gradient penalties, Hessian-vector products.
  bool create_graph = false;
  /// When not empty, only these tensors' grad() receive the gradient (leaves, or non-leaves, whose
  /// grad() then accumulates as with retain_grad); other leaves are left alone.
  std::vector<Tensor> inputs{};
};

// --- creation ---
Tensor empty(const Shape& shape, DType dtype = kFloat32);  ///< uninitialised values
Tensor zeros(const Shape& shape, DType dtype = kFloat32);               ///< filled with 0
Tensor ones(const Shape& shape, DType dtype = kFloat32);                ///< filled with 1
Tensor full(const Shape& shape, double value, DType dtype = kFloat32);  ///< filled with value
/// U[0, 1) and N(0, 1) from `generator`, or from the default generator when it is null or omitted.
///@{
Tensor rand(const Shape& shape, DType dtype = kFloat32, Generator* generator = nullptr);
Tensor rand(const Shape& shape, Generator& generator, DType dtype = kFloat32);
Tensor randn(const Shape& shape, DType dtype = kFloat32, Generator* generator = nullptr);
Tensor randn(const Shape& shape, Generator& generator, DType dtype = kFloat32);
///@}
/// Integers uniform in [low, high) (low = 0 when omitted), as torch.randint; int64 by default,
/// float32/float64 hold them exactly when |low|, |high| ≤ 2^digits.
///@{
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64, Generator* generator = nullptr);
Tensor randint(int64_t high, const Shape& shape, DType dtype = kInt64, Generator* generator = nullptr);
///@}
/// A random permutation of 0, 1, ..., n − 1, as torch.randperm.
///@{
Tensor randperm(int64_t n, DType dtype = kInt64, Generator* generator = nullptr);
Tensor randperm(int64_t n, Generator& generator, DType dtype = kInt64);
///@}
/// values in row-major order; an empty shape means a 1-D tensor of values.size() elements. Converted
/// as .to() converts: tensor({1, 0, 2}, {}, kBool) is [true, false, true]; int64 values are exact up
/// to 2^53. A braced list of numbers always comes here (float32 unless a dtype is given); for
/// exact integers or bools pass a std::vector of them (the overloads below).
Tensor tensor(const std::vector<double>& values, const Shape& shape = {}, DType dtype = kFloat32);
/// The element types a `std::vector` passed to tg::tensor may hold besides double.
template <typename T>
concept TensorData =
    std::same_as<T, int64_t> || std::same_as<T, float> || std::same_as<T, bool> || std::same_as<T, BFloat16>;
/// A tensor from a `std::vector` of int64_t, float, bool or tg::BFloat16, of that element's dtype
/// (int64, float32, bool, bfloat16) unless `dtype` says otherwise, as torch.tensor: the values are copied as they are
/// (an int64 above 2^53 stays exact), or converted once as .to() converts. Only a `std::vector`
/// binds here, never a braced list: `tg::tensor(std::vector<int64_t>{3, 1, 2})` is int64.
template <TensorData T>
Tensor tensor(const std::vector<T>& values, const Shape& shape = {}, DType dtype = dtype_of<T>());

/// The argument types of tg::arange: any integer or floating-point type but bool.
template <typename N>
concept ArangeNumber = (std::integral<N> || std::floating_point<N>) && !std::same_as<N, bool>;
namespace detail {
/// One argument of tg::arange, remembering whether it was an integer (the result's dtype depends on it).
struct ArangeScalar {
  bool integral;     ///< given as an integer type
  int64_t integer;   ///< the value, when integral
  double floating;   ///< the value as a double (always set)
};
/// The one implementation behind the tg::arange templates.
Tensor arange(ArangeScalar start, ArangeScalar end, ArangeScalar step, std::optional<DType> dtype);
/// An argument of tg::arange as an ArangeScalar (an unsigned value above int64's range is refused).
template <ArangeNumber N>
ArangeScalar arange_scalar(N value) {
  if constexpr (std::integral<N>) {
    if constexpr (std::is_unsigned_v<N>)
      check(value <= static_cast<std::make_unsigned_t<int64_t>>(INT64_MAX), "arange", "bound ", value,
            " is outside int64's range");
    return {true, static_cast<int64_t>(value), static_cast<double>(value)};
  } else {
    return {false, 0, static_cast<double>(value)};
  }
}
}  // namespace detail
/// torch.arange: the values start, start + step, ... below end (above it when step < 0), computed
/// as start + i·step; ceil((end − start) / step) of them. The dtype is int64 when every argument is
/// an integer and float32 when one is floating-point, unless `dtype` is given (int64, float32,
/// float64 or bfloat16; an int64 dtype truncates the arguments first, as PyTorch does). tg::Error for a zero
/// step, a step of the wrong sign, a non-finite bound or a size that overflows. `arange(end)`
/// starts at 0 with step 1.
template <ArangeNumber End>
Tensor arange(End end, std::optional<DType> dtype = std::nullopt) {
  return detail::arange(detail::arange_scalar(int64_t{0}), detail::arange_scalar(end), detail::arange_scalar(int64_t{1}),
                        dtype);
}
/// torch.arange(start, end, step, dtype): see arange(end) for the rules; `tg::arange(0, 1, 0.1)` is
/// float32, `tg::arange(2, 11, 3)` int64.
template <ArangeNumber Start, ArangeNumber End, ArangeNumber Step = int64_t>
Tensor arange(Start start, End end, Step step = 1, std::optional<DType> dtype = std::nullopt) {
  return detail::arange(detail::arange_scalar(start), detail::arange_scalar(end), detail::arange_scalar(step), dtype);
}
Tensor scalar_tensor(double value, DType dtype = kFloat32);  ///< 0-d
Tensor zeros_like(const Tensor& t);                ///< zeros(t.shape(), t.dtype())
Tensor ones_like(const Tensor& t);                 ///< ones(t.shape(), t.dtype())
Tensor full_like(const Tensor& t, double value);   ///< full(t.shape(), value, t.dtype())

// --- arithmetic with NumPy/PyTorch broadcasting; scalars take the tensor's dtype ---
/// a + b, a − b, a · b and a / b elementwise, with broadcasting; a scalar takes the tensor's dtype.
///@{
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
///@}
Tensor operator-(const Tensor& a);  ///< −a elementwise

/// The matrix product with torch.matmul's rules, float32 or float64 (bfloat16: in float32, rounded once):
/// - 1-D · 1-D: the dot product, 0-d;
/// - 2-D · 2-D: [M, K] · [K, N] → [M, N];
/// - a 1-D left operand [K] is read as the row [1, K] and a 1-D right operand as the column
///   [K, 1], that dim then removed from the result ([K] · [K, N] → [N], [M, K] · [K] → [M]);
/// - more dims: the dims before the last two are batch dims, broadcast against each other
///   ([2, 1, M, K] · [5, K, N] → [2, 5, M, N]; either operand may have fewer).
/// Differentiable in both operands; an operand repeated over the batch gets its gradients summed.
/// tg::Error naming both shapes when the inner sizes differ, the batch dims do not broadcast, an
/// operand is 0-d, or the dtypes differ or are not floating.
Tensor matmul(const Tensor& a, const Tensor& b);
/// Batched product without broadcasting, as torch.bmm: [B, M, K] · [B, K, N] → [B, M, N].
Tensor bmm(const Tensor& a, const Tensor& b);
/// β·input + α·(batch1 · batch2), as torch.baddbmm: batch1 [B, M, K], batch2 [B, K, N], input
/// broadcast to [B, M, N]. With beta = 0 input is not read (NaN or Inf in it do not reach the
/// result) and its gradient is 0.
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta = 1.0,
               double alpha = 1.0);

/// x.permute(dims), x.tril(diagonal) and x.triu(diagonal) as functions (torch.permute, torch.tril, torch.triu).
///@{
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
///@}
/// input with src written over input.slice(dim, start, end, step), as torch.slice_scatter; src
/// has exactly that slice's shape and input's dtype. Out of place; gradients to input (zero in
/// the slice) and to src (the slice of the incoming one).
Tensor slice_scatter(const Tensor& input, const Tensor& src, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
                     std::optional<int64_t> end = std::nullopt, int64_t step = 1);
/// input with src written over input.select(dim, index), as torch.select_scatter; src has the
/// shape of input without dim. Out of place; gradients to input and src as slice_scatter's.
Tensor select_scatter(const Tensor& input, const Tensor& src, int64_t dim, int64_t index);

// --- softmax family, selection, joining and indexing (see the methods of the same names) ---
/// What x.max(dim), x.min(dim), x.sort(dim) and x.topk(k, dim) return.
struct Tensor::ValuesAndIndices {
  Tensor values;   ///< the selected values along dim: the largest (smallest), or in sorted order
  Tensor indices;  ///< int64: where along dim each value came from
};
/// The Tensor methods of the same names as functions: tg::sort(x, args...) is x.sort(args...);
/// see Tensor::sort, Tensor::argsort and Tensor::topk for the order, ties and NaN.
///@{
Tensor::ValuesAndIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor::ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
///@}
/// num_samples int64 indices of categories drawn from each row of probs (1-D [C] gives
/// [num_samples], 2-D [N, C] gives [N, num_samples]), category c of a row with probability
/// proportional to its weight, as torch.multinomial: the weights need not sum to 1 but must be
/// finite and >= 0 with a positive sum per row (tg::Error otherwise), float32 or float64. Without
/// replacement (num_samples <= C) a category is drawn at most once per row. PyTorch 1.13's CPU
/// draws for the same seed: without replacement the topk of w / E with one E ~ Exp(1) per
/// weight; with replacement one uniform per sample looked up in the row's
/// normalised cumulative sums. Draws come from `generator`, or the default one when null. One
/// difference: when num_samples exceeds a row's number of positive weights (without replacement),
/// its zero-weight categories come last in index order, where PyTorch's order is unspecified.
///@{
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* generator = nullptr);
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& generator);
///@}
/// The Tensor method of the same name as a function: f(x, args...) is x.f(args...).
///@{
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
///@}
/// Joins tensors of one dtype whose shapes agree except in dim (cat), or agree fully (stack, which
/// adds dim). As in PyTorch, cat skips 1-D tensors of shape [0].
///@{
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
///@}
/// The Tensor method of the same name as a function: f(x, args...) is x.f(args...).
///@{
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, std::initializer_list<int64_t> split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
///@}
/// Indices are int64 in [0, size) (tg::Error naming the op, the index and the size otherwise).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);  ///< x[..., index[k], ...]
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);  ///< out[c] = x[c, dim := index[c]]
/// x with src[c] added at x[c, dim := index[c]]; gradients flow to x and src.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// The Tensor method of the same name as a function: f(x, args...) is x.f(args...), and
/// f(a, b) is a.f(b).
///@{
Tensor sqrt(const Tensor& x);
/// 1 / √x elementwise: see Tensor::rsqrt.
Tensor rsqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
/// base^exponent elementwise with broadcasting: see Tensor::pow(const Tensor&).
Tensor pow(const Tensor& base, const Tensor& exponent);
/// base^exponent for a scalar base, as torch.pow(Scalar, Tensor): the result has the exponent's
/// dtype (float32, float64), the base rounded to it. Gradient g · base^e · log(base), and 0 where
/// base = 0 and e >= 0 (PyTorch's convention).
Tensor pow(double base, const Tensor& exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor erf(const Tensor& x);  ///< x.erf(): the error function elementwise, as torch.erf
Tensor abs(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x, int64_t decimals = 0);
Tensor sign(const Tensor& x);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max = std::nullopt);
/// clamp with tensor bounds, broadcasting: see Tensor::clamp(const std::optional<Tensor>&, ...).
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
///@}
/// tg::fmod(x, number) is x.fmod(number), tg::remainder(x, number) x.remainder(number).
///@{
template <typename Number>
  requires((std::integral<Number> || std::floating_point<Number>) && !std::same_as<Number, bool>)
Tensor fmod(const Tensor& x, Number other) {
  return x.fmod(other);
}
template <typename Number>
  requires((std::integral<Number> || std::floating_point<Number>) && !std::same_as<Number, bool>)
Tensor remainder(const Tensor& x, Number other) {
  return x.remainder(other);
}
///@}
/// condition (bool) ? a : b elementwise, all three broadcast together; a and b promoted to one dtype.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);  ///< x.masked_fill(mask, value)
/// The Tensor method of the same name as a function: f(a, b) is a.f(b).
///@{
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
///@}
/// a == b is eq(a, b), and likewise != ne, < lt, <= le, > gt, >= ge; a scalar is rounded to the
/// tensor's dtype first (a float tensor's).
///@{
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor operator==(double a, const Tensor& b);
Tensor operator!=(double a, const Tensor& b);
Tensor operator<(double a, const Tensor& b);
Tensor operator<=(double a, const Tensor& b);
Tensor operator>(double a, const Tensor& b);
Tensor operator>=(double a, const Tensor& b);
///@}

/// The shape that a and b broadcast to, or tg::Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");

/// Prints like PyTorch: tensor([[ 0.1000, -1.2000]]), 4 decimals, aligned columns, the dtype when it
/// is not float32, and requires_grad / grad_fn like PyTorch does.
std::ostream& operator<<(std::ostream& out, const Tensor& t);
std::string to_string(const Shape& shape);  ///< "[2, 3]"

}  // namespace tg
