/// @file
/// Custom autograd functions: an operation with a hand-written backward, in the shape of libtorch's
/// C++ API (torch/csrc/autograd/custom_function.h).
///
/// @code
///   // y = x · sigmoid(x) (SiLU) as one node: forward saves x, backward applies
///   // dy/dx = σ(x) · (1 + x · (1 − σ(x))).
///   struct SiLU : tg::autograd::Function<SiLU> {
///     static tg::Tensor forward(tg::autograd::AutogradContext* ctx, const tg::Tensor& x) {
///       ctx->save_for_backward({x});
///       return x * x.sigmoid();
///     }
///     static tg::autograd::variable_list backward(tg::autograd::AutogradContext* ctx,
///                                                 tg::autograd::variable_list grad_outputs) {
///       const tg::Tensor x = ctx->get_saved_variables()[0];
///       const tg::Tensor s = x.sigmoid();
///       return {grad_outputs[0] * s * (1.0 + x * (1.0 - s))};
///     }
///   };
///   tg::Tensor y = SiLU::apply(x);  // y.grad_fn_name() is "SiLUBackward"
/// @endcode
///
/// How `apply(args...)` runs, as libtorch's:
/// - The tensor arguments (a `Tensor`, a `std::optional<Tensor>` holding a defined tensor, each
///   element of a `std::vector<Tensor>`) are the node's inputs; every other argument is passed
///   through untouched. `forward` runs with grad mode off, so nothing inside it is recorded.
/// - When grad mode is on and an input requires grad, the outputs get one new node, named after
///   the type with "Backward" appended (`MyOp` → "MyOpBackward"; namespaces are dropped): each
///   floating-point output that is not marked non-differentiable requires grad. Otherwise forward
///   is all that runs, and the outputs require no grad.
/// - An input returned as it is comes back as a new tensor sharing its storage (a detached alias
///   with this node's history), unless it was marked dirty: then the input itself is the output,
///   its version is bumped and its history continues from this node.
/// - `backward(ctx, grad_outputs)` gets one gradient per output (zeros where none arrived, unless
///   `set_materialize_grads(false)`: then undefined) and returns one per forward argument: an
///   undefined Tensor for a non-tensor argument or an input without a gradient; extra trailing
///   undefined entries are allowed. The gradient of an input that does not require grad is
///   ignored. Any other count, a defined gradient for a non-tensor argument, or a gradient whose
///   shape or dtype differs from its input's is a tg::Error naming the function and the shapes.
/// - Backward runs in the pass's grad mode: under `create_graph` the tg operations it calls are
///   recorded, so a backward written with tg operations can be differentiated again, and
///   `get_saved_variables()` returns tensors connected to the graph (a saved input is that input,
///   a saved output is that output). Write backward with tg operations for that to hold.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg {

/// A value of one of a few types, stored in AutogradContext::saved_data: libtorch's IValue for the
/// types a custom function saves. Built implicitly from a double, an integer, a bool, a string, a
/// Tensor, or a list of integers, doubles or tensors; read back with the `to...` accessor of the
/// type it holds (another accessor is a tg::Error naming both types: an integer is not read as a
/// double, as in libtorch).
class IValue {
 public:
  // The constructors are implicit on purpose, as libtorch's: `ctx->saved_data["n"] = 2.0;`.
  IValue() = default;  ///< None
  /// A floating-point number: toDouble().
  template <std::floating_point F>
  IValue(F value) : value_(static_cast<double>(value)) {}
  /// An integer (any width, not bool): toInt().
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  IValue(I value) : value_(static_cast<int64_t>(value)) {}
  IValue(bool value) : value_(value) {}                      ///< toBool()
  IValue(std::string value) : value_(std::move(value)) {}    ///< toString()
  IValue(const char* value) : value_(std::string(value)) {}  ///< toString()
  IValue(std::string_view value) : value_(std::string(value)) {}  ///< toString()
  IValue(Tensor value) : value_(std::move(value)) {}              ///< toTensor()
  IValue(std::vector<int64_t> value) : value_(std::move(value)) {}  ///< toIntVector() (a Shape too)
  IValue(std::vector<double> value) : value_(std::move(value)) {}   ///< toDoubleVector()
  IValue(std::vector<Tensor> value) : value_(std::move(value)) {}   ///< toTensorVector()

  bool isNone() const { return std::holds_alternative<std::monostate>(value_); }  ///< default-constructed
  bool isDouble() const { return std::holds_alternative<double>(value_); }        ///< holds a double
  bool isInt() const { return std::holds_alternative<int64_t>(value_); }          ///< holds an integer
  bool isBool() const { return std::holds_alternative<bool>(value_); }            ///< holds a bool
  bool isString() const { return std::holds_alternative<std::string>(value_); }   ///< holds a string
  bool isTensor() const { return std::holds_alternative<Tensor>(value_); }        ///< holds a Tensor
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(value_); }  ///< integers
  bool isDoubleList() const { return std::holds_alternative<std::vector<double>>(value_); }  ///< doubles
  bool isTensorList() const { return std::holds_alternative<std::vector<Tensor>>(value_); }  ///< tensors

  double toDouble() const { return get<double>("toDouble"); }    ///< the double; tg::Error for another type
  int64_t toInt() const { return get<int64_t>("toInt"); }        ///< the integer; tg::Error for another type
  bool toBool() const { return get<bool>("toBool"); }            ///< the bool; tg::Error for another type
  const std::string& toStringRef() const { return get<std::string>("toStringRef"); }  ///< the string
  std::string toString() const { return get<std::string>("toString"); }  ///< a copy of the string
  Tensor toTensor() const { return get<Tensor>("toTensor"); }    ///< the Tensor; tg::Error for another type
  std::vector<int64_t> toIntVector() const { return get<std::vector<int64_t>>("toIntVector"); }  ///< integers
  std::vector<double> toDoubleVector() const { return get<std::vector<double>>("toDoubleVector"); }  ///< doubles
  std::vector<Tensor> toTensorVector() const { return get<std::vector<Tensor>>("toTensorVector"); }  ///< tensors
  /// The held type's name, as libtorch's: "None", "Double", "Int", "Bool", "String", "Tensor",
  /// "IntList", "DoubleList", "TensorList".
  const char* tagKind() const;

 private:
  // tg::Error naming the accessor, the held type and the expected one.
  [[noreturn]] void wrong_type(const char* accessor, const char* expected) const;
  template <typename T>
  const T& get(const char* accessor) const {
    if (const T* held = std::get_if<T>(&value_)) return *held;
    wrong_type(accessor, kind_of<T>());
  }
  template <typename T>
  static constexpr const char* kind_of() {
    if constexpr (std::is_same_v<T, double>) return "Double";
    else if constexpr (std::is_same_v<T, int64_t>) return "Int";
    else if constexpr (std::is_same_v<T, bool>) return "Bool";
    else if constexpr (std::is_same_v<T, std::string>) return "String";
    else if constexpr (std::is_same_v<T, Tensor>) return "Tensor";
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return "IntList";
    else if constexpr (std::is_same_v<T, std::vector<double>>) return "DoubleList";
    else return "TensorList";
  }

  std::variant<std::monostate, double, int64_t, bool, std::string, Tensor, std::vector<int64_t>,
               std::vector<double>, std::vector<Tensor>>
      value_;
};

namespace detail {
struct CustomFunctionNode;  // the tape node of one apply (core/src/autograd/function.cpp)
class FunctionCall;
}  // namespace detail

namespace autograd {

using Variable = Tensor;                   ///< libtorch's name for a tensor in autograd code
using variable_list = std::vector<Tensor>;  ///< libtorch's list of variables
using tensor_list = std::vector<Tensor>;    ///< libtorch's list of tensors

/// What a custom function's forward leaves for its backward (libtorch's AutogradContext): saved
/// tensors, saved values, and which inputs and outputs are special. forward receives it, backward
/// receives the same one; it lives as long as the node (the outputs' history) does.
class AutogradContext {
 public:
  AutogradContext(const AutogradContext&) = delete;
  AutogradContext& operator=(const AutogradContext&) = delete;

  /// Values for backward by name: `ctx->saved_data["scale"] = 2.0;` in forward, then
  /// `ctx->saved_data["scale"].toDouble()` in backward. Kept until the graph is freed.
  std::unordered_map<std::string, IValue> saved_data;

  /// Saves tensors for backward (inputs, outputs, or undefined tensors); call it at most once, in
  /// forward. Each is checked against its version counter when backward reads it.
  void save_for_backward(variable_list to_save);
  /// The tensors save_for_backward saved, in backward only. tg::Error naming the function and the
  /// tensor's shape when one was modified in place after forward saved it, or after this node's
  /// saved tensors were freed (a second backward). Under create_graph, a saved input is the input
  /// itself and a saved output the output itself, so what backward computes from them is recorded.
  variable_list get_saved_variables() const;
  /// Whether the gradient of the i-th TENSOR input is needed (libtorch's index: it counts only the
  /// tensor arguments, in order; the elements of a `std::vector<Tensor>` count one each). False
  /// for an input that does not require grad, or (in backward) one the pass does not reach for.
  bool needs_input_grad(size_t i) const;
  /// Marks inputs that forward modified in place; each must be returned as an output. Their
  /// version is bumped and their history continues from this node. A leaf that requires grad
  /// cannot be modified in place: tg::Error, as in PyTorch.
  void mark_dirty(const variable_list& inputs);
  /// Marks outputs that have no gradient (indices, masks): they do not require grad, and backward
  /// receives zeros (or undefined, see set_materialize_grads) for them.
  void mark_non_differentiable(const variable_list& outputs);
  /// Whether backward receives zeros (true, the default) or undefined tensors for the outputs that
  /// got no gradient.
  void set_materialize_grads(bool value);

 private:
  friend struct tg::detail::CustomFunctionNode;
  explicit AutogradContext(tg::detail::CustomFunctionNode* node) : node_(node) {}
  tg::detail::CustomFunctionNode* node_;  // owns this context
};

}  // namespace autograd

namespace detail {

/// A custom function's backward, with its type erased.
using CustomBackward = autograd::variable_list (*)(autograd::AutogradContext*, autograd::variable_list);

/// "MyOpBackward" for the type MyOp (demangled, namespaces and enclosing classes dropped); the
/// pointer stays valid for the life of the process.
const char* custom_function_name(const std::type_info& type);

/// One call of Function<T>::apply: made before forward with the tensor inputs, finished after it
/// with the outputs. Not for direct use.
class FunctionCall {
 public:
  /// Makes the node; `is_tensor` has one entry per forward argument slot, `inputs` the tensors.
  FunctionCall(const char* name, CustomBackward backward, std::vector<bool> is_tensor, autograd::variable_list inputs);
  ~FunctionCall();
  FunctionCall(const FunctionCall&) = delete;
  FunctionCall& operator=(const FunctionCall&) = delete;
  autograd::AutogradContext* context() const;  ///< the node's context, handed to forward
  /// Connects forward's outputs to the node (when an input requires grad and grad mode is on),
  /// applies mark_dirty and mark_non_differentiable, saves what forward asked for.
  autograd::variable_list finish(autograd::variable_list outputs);

 private:
  std::shared_ptr<CustomFunctionNode> node_;
};

/// Appends one entry per argument slot to `is_tensor` and each tensor to `inputs` (libtorch's
/// extract_vars): a Tensor, a std::optional<Tensor> holding a defined one, each element of a
/// std::vector<Tensor>; anything else is a non-tensor slot.
template <typename Argument>
void collect_function_argument(std::vector<bool>& is_tensor, autograd::variable_list& inputs, const Argument& argument) {
  if constexpr (std::is_base_of_v<Tensor, Argument>) {
    is_tensor.push_back(true);
    inputs.push_back(argument);
  } else if constexpr (std::is_same_v<Argument, std::optional<Tensor>>) {
    const bool present = argument.has_value() && argument->defined();
    is_tensor.push_back(present);
    if (present) inputs.push_back(*argument);
  } else if constexpr (std::is_same_v<Argument, std::vector<Tensor>>) {
    for (const Tensor& tensor : argument) {
      is_tensor.push_back(true);
      inputs.push_back(tensor);
    }
  } else {
    is_tensor.push_back(false);
  }
}

}  // namespace detail

namespace autograd {

/// What X::forward returns for these arguments: Tensor or variable_list.
template <typename X, typename... Args>
using forward_t = decltype(X::forward(nullptr, std::declval<Args>()...));

/// The base of a custom function (CRTP): derive `struct MyOp : Function<MyOp>`, give it
///
///     static Tensor forward(AutogradContext* ctx, ...);            // or variable_list
///     static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
///
/// and call `MyOp::apply(args...)` (see the file comment for what apply does).
template <class T>
struct Function {
  /// Runs T::forward(ctx, args...) with grad mode off and, when grad mode is on and a tensor
  /// argument requires grad, records one node whose backward is T::backward. Returns what forward
  /// returns (a Tensor or a variable_list), with the history attached.
  template <typename X = T, typename... Args>
  static auto apply(Args&&... args) -> std::enable_if_t<std::is_same_v<X, T>, forward_t<X, Args...>> {
    using Output = forward_t<X, Args...>;
    static_assert(std::is_same_v<Output, Tensor> || std::is_same_v<Output, variable_list>,
                  "a custom function's forward must return tg::Tensor or std::vector<tg::Tensor>");
    static const char* const name = tg::detail::custom_function_name(typeid(T));
    std::vector<bool> is_tensor;
    variable_list inputs;
    is_tensor.reserve(sizeof...(Args));
    (tg::detail::collect_function_argument(is_tensor, inputs, std::as_const(args)), ...);
    tg::detail::FunctionCall call(name, &run_backward, std::move(is_tensor), std::move(inputs));
    Output outputs;
    {
      NoGradGuard no_grad;  // forward computes; only the node records
      outputs = T::forward(call.context(), std::forward<Args>(args)...);
    }
    if constexpr (std::is_same_v<Output, Tensor>) {
      return std::move(call.finish({std::move(outputs)})[0]);
    } else {
      return call.finish(std::move(outputs));
    }
  }

 private:
  static variable_list run_backward(AutogradContext* ctx, variable_list grad_outputs) {
    return T::backward(ctx, std::move(grad_outputs));
  }
};

}  // namespace autograd
}  // namespace tg
