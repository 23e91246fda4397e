// Custom autograd functions (tapegrad/autograd/function.hpp): the node of one Function<T>::apply,
// what apply does to forward's outputs, and the AutogradContext that forward and backward share.
//
// One apply records one node with an edge per tensor input and one output slot per forward
// output, as libtorch's CppNode: the node owns the context (saved tensors, saved_data), and the
// outputs own the node.
#include "tapegrad/autograd/function.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "autograd/node.hpp"
#include "autograd/pass_op.hpp"
#include "tensor_impl.hpp"

namespace tg {

// --- IValue ---------------------------------------------------------------------------------------

const char* IValue::tagKind() const {
  switch (value_.index()) {
    case 0: return "None";
    case 1: return "Double";
    case 2: return "Int";
    case 3: return "Bool";
    case 4: return "String";
    case 5: return "Tensor";
    case 6: return "IntList";
    case 7: return "DoubleList";
    default: return "TensorList";
  }
}

void IValue::wrong_type(const char* accessor, const char* expected) const {
  detail::fail(accessor, "expected an IValue holding ", expected, ", got ", tagKind());
}

namespace detail {

// --- the node -------------------------------------------------------------------------------------

namespace {
// The shape and dtype of a tensor the node checks against (an input) or makes zeros of (an output).
struct TensorMeta {
  Shape shape;
  DType dtype = kFloat32;
};
}  // namespace

struct CustomFunctionNode final : autograd::Node {
  CustomFunctionNode(const char* name, CustomBackward backward) : Node(name), backward(backward), context(this) {}

  void apply(const Tensor& grad_output, autograd::GradInputs& grads) override {
    std::vector<Tensor> grad_outputs{grad_output};
    apply_multi(grad_outputs, grads);
  }
  void apply_multi(std::vector<Tensor>& grad_outputs, autograd::GradInputs& grads) override;
  Tensor mark_not_differentiable(const Tensor& grad) const;
  void release() override {
    const std::lock_guard lock(mutex);
    saved.clear();
    saved_released = true;
  }

  CustomBackward backward;
  autograd::AutogradContext context;
  std::vector<bool> is_tensor;      // per forward argument slot
  std::vector<TensorMeta> inputs;   // per tensor input: what its gradient must be
  std::vector<TensorMeta> outputs;  // per output: what a materialised zero gradient is
  // The tensor inputs, by identity, while forward runs (mark_dirty and the outputs that are inputs).
  std::vector<const TensorImpl*> input_impls;

  bool is_input(const TensorImpl* impl) const {
    return std::find(input_impls.begin(), input_impls.end(), impl) != input_impls.end();
  }

  // The context's state, written by forward through AutogradContext.
  autograd::variable_list to_save;  // until finish turns them into `saved`
  std::vector<std::optional<autograd::SavedTensor>> saved;
  std::vector<const TensorImpl*> dirty;
  std::vector<const TensorImpl*> non_differentiable;
  bool materialize_grads = true;
  bool saved_released = false;
  // While backward runs in a recorded pass (create_graph): the first tensor it was given or read
  // (a gradient, a saved tensor) that requires grad, if any.
  Tensor differentiable_read;
  bool in_forward = true;
  autograd::GradInputs* running = nullptr;  // the pass's sink while backward runs
  std::mutex mutex;  // a user's backward may write saved_data: one backward at a time per node
};

namespace {

bool contains(const std::vector<const TensorImpl*>& impls, const TensorImpl* impl) {
  return std::find(impls.begin(), impls.end(), impl) != impls.end();
}

std::string input_description(const CustomFunctionNode& node, size_t tensor_index) {
  const TensorMeta& meta = node.inputs[tensor_index];
  return concat(meta.dtype, " ", meta.shape);
}

}  // namespace

void CustomFunctionNode::apply_multi(std::vector<Tensor>& grad_outputs, autograd::GradInputs& grads) {
  const std::lock_guard lock(mutex);
  check(!saved_released, name, "backward through the graph a second time: its saved tensors were freed");
  // Undefined gradients (outputs that got none, non-differentiable outputs) as zeros, unless the
  // function asked for them undefined.
  autograd::variable_list backward_inputs(grad_outputs.size());
  differentiable_read = Tensor();
  for (size_t k = 0; k < grad_outputs.size(); ++k) {
    if (grads.create_graph() && !differentiable_read.defined() && grad_outputs[k].defined() &&
        grad_outputs[k].requires_grad())
      differentiable_read = grad_outputs[k];
    if (grad_outputs[k].defined() || !materialize_grads)
      backward_inputs[k] = std::move(grad_outputs[k]);
    else
      backward_inputs[k] = zeros(outputs[k].shape, outputs[k].dtype);
  }

  struct Running {  // the sink is reachable from the context while backward runs, and only then
    CustomFunctionNode& node;
    explicit Running(CustomFunctionNode& node, autograd::GradInputs& grads) : node(node) { node.running = &grads; }
    ~Running() { node.running = nullptr; }
  } running_scope(*this, grads);
  autograd::variable_list results = backward(&context, std::move(backward_inputs));

  // One gradient per forward argument; more only when the extra ones are undefined.
  const size_t expected = is_tensor.size();
  if (results.size() > expected &&
      std::all_of(results.begin() + static_cast<std::ptrdiff_t>(expected), results.end(),
                  [](const Tensor& grad) { return !grad.defined(); }))
    results.resize(expected);
  check(results.size() == expected, name, "backward returned ", results.size(), " gradients, expected ", expected,
        " (one per argument of forward, an undefined Tensor for a non-tensor argument or no gradient)");

  size_t tensor_index = 0;
  for (size_t slot = 0; slot < expected; ++slot) {
    Tensor& grad = results[slot];
    if (!is_tensor[slot]) {
      check(!grad.defined(), name, "backward returned a defined gradient (shape ", grad.defined() ? grad.shape() : Shape{},
            ") for argument ", slot, " of forward, which is not a tensor; return an undefined Tensor there");
      continue;
    }
    const size_t input = tensor_index++;
    // The gradient of an input that needs none is ignored, as libtorch's engine does.
    if (!grad.defined() || !grads.needed(input)) continue;
    const TensorMeta& meta = inputs[input];
    check(grad.shape() == meta.shape && grad.dtype() == meta.dtype, name, "backward returned a gradient of shape ",
          grad.shape(), " (", grad.dtype(), ") for argument ", slot, " of forward, a ", input_description(*this, input),
          " tensor; the gradient must have its input's shape and dtype");
    if (differentiable_read.defined() && !grad.requires_grad()) grad = mark_not_differentiable(grad);
    grads.set(input, std::move(grad));
  }
  differentiable_read = Tensor();
}

// A recorded pass (create_graph) gave backward something that requires grad, and it returned a
// gradient that does not: backward was computed outside autograd (under NoGradGuard, on detached
// tensors or raw data), and that gradient's own derivative is unknown. As PyTorch does for a
// once_differentiable function, the gradient gets a node that refuses to be differentiated, so a
// double backward through it names this function instead of failing later with a generic message.
Tensor CustomFunctionNode::mark_not_differentiable(const Tensor& grad) const {
  Tensor marked = grad.detach();
  autograd::record(marked, name, {differentiable_read}, [name = name](const Tensor&, autograd::GradInputs&) {
    detail::fail(autograd::current_pass_op(), "the backward of ", name,
                 " is not differentiable: it was computed without recording (under NoGradGuard, on detached "
                 "tensors or raw data), so its gradient cannot be differentiated again; write that backward in "
                 "tensor operations to take a double backward through it");
  });
  return marked;
}

// --- apply ----------------------------------------------------------------------------------------

const char* custom_function_name(const std::type_info& type) {
  // Interned: a Function's node name must outlive every node, and each type asks once.
  static std::mutex mutex;
  static std::set<std::string> names;
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  // Drop the namespaces and enclosing classes: the last "::" outside template arguments.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i + 1 < full.size(); ++i) {
    if (full[i] == '<' || full[i] == '(') ++depth;
    if (full[i] == '>' || full[i] == ')') --depth;
    if (depth == 0 && full[i] == ':' && full[i + 1] == ':') start = i + 2;
  }
  const std::lock_guard lock(mutex);
  return names.insert(full.substr(start) + "Backward").first->c_str();
}

FunctionCall::FunctionCall(const char* name, CustomBackward backward, std::vector<bool> is_tensor,
                           autograd::variable_list inputs)
    : node_(std::make_shared<CustomFunctionNode>(name, backward)) {
  CustomFunctionNode& node = *node_;
  node.is_tensor = std::move(is_tensor);
  node.inputs.reserve(inputs.size());
  bool any_requires_grad = false;
  node.input_impls.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    // An undefined Tensor argument is an input without a gradient, as in libtorch.
    if (!input.defined()) {
      node.inputs.emplace_back();
      node.input_impls.push_back(nullptr);
      continue;
    }
    node.inputs.push_back({input.shape(), input.dtype()});
    node.input_impls.push_back(tg::detail::impl_of(input));
    any_requires_grad = any_requires_grad || input.requires_grad();
  }
  // Edges only when the node will be part of the graph: otherwise needs_input_grad is false for all.
  if (is_grad_enabled() && any_requires_grad) {
    node.next.reserve(inputs.size());
    for (const Tensor& input : inputs)
      node.next.push_back(input.defined() ? autograd::gradient_edge(input) : autograd::Edge{});
    if (autograd::anomaly_detection_on()) node.anomaly_tag = autograd::current_anomaly_tag();
  }
}

FunctionCall::~FunctionCall() = default;

autograd::AutogradContext* FunctionCall::context() const { return &node_->context; }

autograd::variable_list FunctionCall::finish(autograd::variable_list outputs) {
  CustomFunctionNode& node = *node_;
  const char* name = node.name;
  node.in_forward = false;
  const bool executable = !node.next.empty();

  // The dirty inputs were written by forward: a tensor saved before (by an earlier op) must fail
  // its version check, as after any in-place op.
  for (const TensorImpl* impl : node.dirty) ++impl->storage->version;

  // Every check before any output is touched, so that an error leaves no tensor half rewired.
  check(!outputs.empty(), name, "forward returned an empty list of tensors");
  std::vector<bool> differentiable(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    check(outputs[k].defined(), name, "forward returned an undefined tensor as output ", k);
    const TensorImpl* impl = tg::detail::impl_of(outputs[k]);
    differentiable[k] = executable && !contains(node.non_differentiable, impl) && is_floating_point(impl->dtype);
    check(!(differentiable[k] && contains(node.dirty, impl) && impl->grad_fn == nullptr && impl->requires_grad),
          name, "a leaf that requires grad (shape ", impl->shape,
          ") was modified in place by forward and marked dirty; a leaf's value must stay what its gradient is "
          "taken at: modify a copy (x.clone()), or call the function under tg::NoGradGuard");
  }
  for (const TensorImpl* impl : node.dirty)
    check(std::any_of(outputs.begin(), outputs.end(),
                      [impl](const Tensor& output) { return tg::detail::impl_of(output) == impl; }),
          name,
          "a tensor marked dirty was not returned by forward: the inputs it modifies in place must be among its "
          "outputs");

  node.set_num_outputs(static_cast<uint32_t>(outputs.size()));
  node.outputs.reserve(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& output = outputs[k];
    const TensorImpl* impl = tg::detail::impl_of(output);
    node.outputs.push_back({output.shape(), output.dtype()});
    const bool is_input = node.is_input(impl);
    const bool is_dirty = contains(node.dirty, impl);
    if (!differentiable[k]) {
      // An input comes back as a new tensor that shares its bytes and none of its history.
      if (output.requires_grad() || (is_input && !is_dirty)) output = output.detach();
      continue;
    }
    // A dirty input is the output itself: its history continues from this node. An input returned
    // as it is, or a tensor that already has a history, is aliased instead: the node must not take
    // over a tensor that another part of the graph (or the caller) owns.
    if (!is_dirty && (is_input || impl->grad_fn != nullptr || impl->requires_grad)) output = output.detach();
    autograd::make_output_edge(output, node_, static_cast<uint32_t>(k));
  }

  if (executable) {
    node.saved.reserve(node.to_save.size());
    for (const Tensor& tensor : node.to_save) {
      if (!tensor.defined()) {
        node.saved.emplace_back();
        continue;
      }
      const TensorImpl* impl = tg::detail::impl_of(tensor);
      // An output is saved as an output (never as an input: that would make the node own its
      // output, which owns the node); anything else keeps its own place in the graph.
      if (impl->grad_fn.get() == &node)
        node.saved.emplace_back(std::in_place, tensor, autograd::SavedTensor::kOutput, impl->output_nr);
      else
        node.saved.emplace_back(std::in_place, tensor);
    }
  }
  node.to_save.clear();
  node.input_impls.clear();
  return outputs;
}

}  // namespace detail

// --- AutogradContext --------------------------------------------------------------------------------

namespace autograd {

void AutogradContext::save_for_backward(variable_list to_save) {
  check(node_->in_forward, node_->name, "save_for_backward must be called in forward");
  node_->to_save = std::move(to_save);
}

variable_list AutogradContext::get_saved_variables() const {
  tg::detail::CustomFunctionNode& node = *node_;
  check(!node.saved_released, node.name,
        "the saved tensors were freed after the first backward; recompute the forward pass, or pass "
        "retain_graph = true to the first backward");
  check(node.running != nullptr, node.name, "get_saved_variables can only be called in backward");
  variable_list result;
  result.reserve(node.saved.size());
  for (const std::optional<SavedTensor>& saved : node.saved) {
    result.push_back(saved ? node.running->unpack(*saved) : Tensor());
    if (node.running->create_graph() && !node.differentiable_read.defined() && result.back().defined() &&
        result.back().requires_grad())
      node.differentiable_read = result.back();
  }
  return result;
}

bool AutogradContext::needs_input_grad(size_t i) const {
  const tg::detail::CustomFunctionNode& node = *node_;
  check(i < node.inputs.size(), node.name, "needs_input_grad(", i, "): forward has ", node.inputs.size(),
        " tensor arguments (the index counts tensor arguments only)");
  if (node.next.empty()) return false;  // no input requires grad, or grad mode is off
  return node.running != nullptr ? node.running->needed(i) : static_cast<bool>(node.next[i]);
}

void AutogradContext::mark_dirty(const variable_list& inputs) {
  tg::detail::CustomFunctionNode& node = *node_;
  check(node.in_forward, node.name, "mark_dirty must be called in forward");
  node.dirty.clear();
  for (const Tensor& input : inputs) {
    check(input.defined(), node.name, "mark_dirty: undefined tensor");
    const TensorImpl* impl = tg::detail::impl_of(input);
    check(node.is_input(impl), node.name, "mark_dirty: the tensor of shape ", input.shape(),
          " is not an input of forward; only inputs modified in place are marked dirty");
    node.dirty.push_back(impl);
  }
}

void AutogradContext::mark_non_differentiable(const variable_list& outputs) {
  tg::detail::CustomFunctionNode& node = *node_;
  check(node.in_forward, node.name, "mark_non_differentiable must be called in forward");
  node.non_differentiable.clear();
  for (const Tensor& output : outputs)
    if (output.defined()) node.non_differentiable.push_back(tg::detail::impl_of(output));
}

void AutogradContext::set_materialize_grads(bool value) { node_->materialize_grads = value; }

}  // namespace autograd
}  // namespace tg
