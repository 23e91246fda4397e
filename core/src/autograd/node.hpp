// The tape's node, and how an operation records one. Private to the library.
//
// A node is: one edge per input of the operation (where that input's gradient goes, or nothing),
// what the backward needs saved (captured by value in the backward closure), and that one backward
// function. An operation records its node right where it computes its output:
//
//   Tensor out = ...forward kernel...;
//   if (autograd::needs_grad(a, b))
//     autograd::record(out, "MulBackward", {a, b}, [saved_a = autograd::SavedTensor(a),
//                                                   saved_b = autograd::SavedTensor(b)](
//         const Tensor& grad_out, autograd::GradInputs& grads) {
//       const Tensor& a = grads.unpack(saved_a);  // tg::Error if `a` was modified in place since
//       const Tensor& b = grads.unpack(saved_b);
//       if (grads.needed(0)) grads.set(0, grad_out * b);
//       if (grads.needed(1)) grads.set(1, grad_out * a);
//     });
//
// Closures save tensors the user can reach (inputs, the output) as SavedTensors, which hold a
// detached view and the storage's version at the time of saving; never `out` itself: the output
// owns the node, and a node that owned its output would never be freed.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <initializer_list>
#include <memory>
#include <string>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "memory/small_block_pool.hpp"
#include "ops/matmul_precision.hpp"
#include "tapegrad/autograd.hpp"
#include "tensor_impl.hpp"

namespace tg::autograd {

struct Node;

// Where one input's gradient goes: the node that produced the input and which of that node's
// outputs it was (torch::autograd::Edge). A null function: the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  explicit operator bool() const { return function != nullptr; }
};

// A node's edges, one per input of its op: inline for up to kInline inputs (every op has at most
// three), on the heap beyond, so that recording a node costs one allocation, not two.
class Edges {
 public:
  static constexpr size_t kInline = 3;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Edge* begin() { return heap_.empty() ? inline_.data() : heap_.data(); }
  Edge* end() { return begin() + size_; }
  const Edge* begin() const { return heap_.empty() ? inline_.data() : heap_.data(); }
  const Edge* end() const { return begin() + size_; }
  Edge& operator[](size_t i) { return begin()[i]; }
  const Edge& operator[](size_t i) const { return begin()[i]; }

  void reserve(size_t count) {
    if (count > kInline && heap_.empty()) {
      heap_.resize(count);
      std::move(inline_.begin(), inline_.begin() + size_, heap_.begin());
    }
  }
  void push_back(Edge edge) {
    if (size_ == kInline && heap_.empty()) reserve(2 * kInline);
    if (!heap_.empty() && size_ == heap_.size()) heap_.resize(2 * size_);
    begin()[size_++] = std::move(edge);
  }
  void clear() noexcept {
    for (Edge& edge : *this) edge.function.reset();
    std::vector<Edge>().swap(heap_);  // frees the heap block; unlike shrink_to_fit, never allocates
    size_ = 0;
  }

 private:
  std::array<Edge, kInline> inline_;
  std::vector<Edge> heap_;  // all the edges once there are more than kInline; empty otherwise
  size_t size_ = 0;
};

// A tensor a backward needs, saved when its node is recorded: a detached view (it shares the
// storage, not the autograd state) and the storage's version at that moment. Unpacking it through
// GradInputs::unpack checks that nothing wrote to the storage in between, as PyTorch's
// SavedVariable does: one integer compare instead of a silently wrong gradient.
//
// A backward that is itself recorded (create_graph) must differentiate through what it saved, so
// the saved tensor also remembers its place in the graph — weakly: the node's own edges already
// hold its inputs' producers, and a strong reference here would chain the nodes' destructors
// through the closures, one stack frame per op. The op's own output is marked kOutput and comes
// back with the node itself as its grad_fn (holding the output would make the node own its
// output, which owns the node). A tensor that is neither input nor output (an intermediate a fused
// kernel keeps, a mask) is saved as an input that needs no gradient: a constant of the backward.
class SavedTensor {
 public:
  enum Kind : uint8_t { kInput, kOutput };
  explicit SavedTensor(const Tensor& tensor, Kind kind = kInput, uint32_t output_nr = 0);

 private:
  friend class GradInputs;
  Tensor tensor_;
  uint64_t version_;
  std::weak_ptr<Node> producer_;       // a non-leaf input's grad_fn
  std::weak_ptr<TensorImpl> leaf_;     // a leaf input that requires grad: the leaf itself
  uint32_t output_nr_;                 // which output of the producer (of this node, for kOutput)
  Kind kind_;
};

// A list of hooks in registration order, each with the id its HookHandle removes. Shared between
// its owner and the handles (weakly), so a handle outliving its owner removes nothing.
template <typename Fn>
struct HookList {
  std::vector<std::pair<uint64_t, Fn>> hooks;
  uint64_t next_id = 0;
};

// Appends `hook` to the list in `slot` (created on first use) and returns the handle removing it.
template <typename Fn>
HookHandle add_hook(std::shared_ptr<HookList<Fn>>& slot, Fn hook) {
  if (!slot) slot = std::make_shared<HookList<Fn>>();
  const uint64_t id = slot->next_id++;
  slot->hooks.emplace_back(id, std::move(hook));
  return HookHandle([list = std::weak_ptr<HookList<Fn>>(slot), id] {
    if (const auto hooks = list.lock())
      std::erase_if(hooks->hooks, [id](const auto& entry) { return entry.first == id; });
  });
}

struct Node;

// The gradients one node sends to its inputs; slot i belongs to the op's i-th input.
class GradInputs {
 public:
  GradInputs(const std::shared_ptr<Node>& node, std::vector<Tensor>& grads, bool create_graph)
      : node_(node), grads_(grads), create_graph_(create_graph) {}
  bool needed(size_t input) const;
  void set(size_t input, Tensor grad) { grads_[input] = std::move(grad); }
  // True when this backward is itself recorded (backward or grad with create_graph): grad mode is
  // on, the saved tensors come back attached to the graph, and the gradients must be computed
  // with differentiable operations so that they can be differentiated again.
  bool create_graph() const { return create_graph_; }
  // The saved tensor, or tg::Error naming this node and the tensor's shape when it was modified in
  // place after it was saved. In a recorded backward a saved output comes back with this node as
  // its grad_fn.
  Tensor unpack(const SavedTensor& saved) const;

 private:
  const std::shared_ptr<Node>& node_;
  std::vector<Tensor>& grads_;
  bool create_graph_;
};

// A tensor hook: receives the gradient of the tensor and returns a replacement, or an undefined
// tensor to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;
using PostAccumulateHook = std::function<void(const Tensor&)>;

// What runs when an output's gradient arrives, before the node uses it: the tensor hooks
// (Tensor::register_hook) in registration order, then, for a non-leaf that retains its gradient
// (Tensor::retain_grad), the store into that tensor's grad.
struct OutputHooks {
  std::shared_ptr<HookList<GradHook>> hooks;
  std::weak_ptr<TensorImpl> retains_grad;
};

struct Node {
  // `is_accumulator`: a leaf's AccumulateGrad, which outlives every pass; all other nodes belong
  // to one graph and are released after they run (unless a pass retains the graph).
  explicit Node(const char* name, bool is_accumulator = false);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Computes the gradients of this node's inputs from the gradient of its output.
  virtual void apply(const Tensor& grad_output, GradInputs& grads) = 0;
  // A node with several outputs gets one gradient per output, undefined where none arrived; a
  // node with one output, the gradient of that one.
  virtual void apply_multi(std::vector<Tensor>& grad_outputs, GradInputs& grads) { apply(grad_outputs[0], grads); }
  // Frees what the backward saved; a released node cannot run again.
  virtual void release() {}
  // Called on every node of a pass when it ends; a failed pass undoes what apply changed outside
  // the graph.
  virtual void end_pass(bool failed) { (void)failed; }

  // The gradient accumulated for output `slot` during a pass.
  Tensor& pending(uint32_t slot) { return slot == 0 ? pending_grad : pending_extra[slot - 1]; }
  // The hooks of output `slot`, made on first use.
  OutputHooks& hooks_of(uint32_t slot) {
    if (output_hooks.size() <= slot) output_hooks.resize(slot + 1);
    return output_hooks[slot];
  }
  // Gives the node `count` outputs (one by default).
  void set_num_outputs(uint32_t count) {
    num_outputs = count;
    pending_extra.resize(count > 0 ? count - 1 : 0);
  }

  const char* name;
  const bool is_accumulator;
  // PyTorch's @once_differentiable: the backward is not written in differentiable operations, and a
  // pass that records the backward (create_graph) refuses to run it rather than return a gradient
  // that would be silently wrong when differentiated again.
  bool once_differentiable = false;
  // Recorded by a product of bfloat16 tensors (ops/matmul_precision.hpp): its backward products
  // run on the bf16 kernels too.
  const tg::detail::Bf16Products products_in_bf16;
  uint32_t num_outputs = 1;
  Edges next;  // per input: its producer, the leaf's AccumulateGrad, or null
  bool released = false;
  bool failed = false;  // released because a backward through it threw

  // Where the op was recorded (the AnomalyTag path), captured only while anomaly detection is on.
  std::string anomaly_tag;
  // Per output: hooks on its gradient, run before apply. Empty until a hook is registered.
  std::vector<OutputHooks> output_hooks;

  // Engine scratch, valid during one backward pass.
  Tensor pending_grad;  // sum of the gradients that reached output 0
  std::vector<Tensor> pending_extra;  // and outputs 1, 2, ... of a node with several
  int64_t dependencies = 0;
  uint64_t visited_in_pass = 0;
  uint64_t target_in_pass = 0;  // this pass captures or accumulates one of this node's outputs
  bool needed_in_pass = false;  // a target is reachable from here: the pass runs this node

 private:
  // Nodes whose last owner is being destroyed, linked through this field so that freeing a long
  // chain needs neither recursion nor an allocation (see ~Node).
  std::shared_ptr<Node> next_orphan_;
};

// The one sink of a leaf that requires grad, made on first use and owned by the leaf for its
// whole life: it adds the incoming gradient to leaf.grad and then runs the leaf's
// post-accumulate hooks. It sees the leaf weakly (the leaf owns it); a gradient that arrives after
// the leaf is gone goes nowhere, as nobody can read it.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf);
  void apply(const Tensor& grad_output, GradInputs& grads) override;
  void end_pass(bool failed) override;

  std::weak_ptr<TensorImpl> leaf;
  std::shared_ptr<HookList<PostAccumulateHook>> post_accumulate_hooks;
  // The leaf's gradient before this pass changed it, restored if the pass fails.
  Tensor grad_before_pass;
  bool changed_in_pass = false;
};

template <typename Backward>
struct FunctionNode final : Node {
  FunctionNode(const char* name, Backward&& backward) : Node(name), backward(std::move(backward)) {}
  void apply(const Tensor& grad_output, GradInputs& grads) override { (*backward)(grad_output, grads); }
  void release() override { backward.reset(); }
  std::optional<Backward> backward;
};

// Where the gradient of `input` must go: its producer (and which output of it), the leaf's
// AccumulateGrad, or nowhere.
Edge gradient_edge(const Tensor& input);

// Makes `output` the `output_nr`-th output of `node`.
void make_output_edge(Tensor& output, std::shared_ptr<Node> node, uint32_t output_nr);

// The leaf's AccumulateGrad, made on first use.
AccumulateGrad& grad_accumulator(const Tensor& leaf);
const std::shared_ptr<AccumulateGrad>& grad_accumulator_ptr(const Tensor& leaf);

// The lock that guards TensorImpl::grad, so that grad() may read it from any thread while a
// backward pass replaces it. One of a fixed set, chosen by address: no mutex per tensor.
std::mutex& grad_mutex(const TensorImpl* impl);

// Anomaly detection (see tg::set_detect_anomaly): the switch, read on every record, and the
// AnomalyTag path of this thread ("" when no tag is alive).
extern std::atomic<bool> anomaly_mode;
inline bool anomaly_detection_on() { return anomaly_mode.load(std::memory_order_relaxed); }
const std::string& current_anomaly_tag();

// True when grad mode is on and at least one input takes part in differentiation.
template <typename... Tensors>
bool needs_grad(const Tensors&... inputs) {
  return is_grad_enabled() && (... || inputs.requires_grad());
}

// Makes `output` the result of a new node with one edge per input (any range of tensors).
template <typename Inputs, typename Backward>
Node& record_node(Tensor& output, const char* name, const Inputs& inputs, Backward&& backward) {
  // From the small-block pool: a node lives for one forward and backward, and the next step's
  // node of the same op takes its block.
  using NodeType = FunctionNode<std::decay_t<Backward>>;
  auto node = std::allocate_shared<NodeType>(tg::detail::PoolAllocator<NodeType>(), name,
                                             std::forward<Backward>(backward));
  node->next.reserve(inputs.size());
  for (const Tensor& input : inputs) node->next.push_back(gradient_edge(input));
  if (anomaly_detection_on()) node->anomaly_tag = current_anomaly_tag();
  Node& recorded = *node;
  TensorImpl* impl = tg::detail::impl_of(output);
  impl->grad_fn = std::move(node);
  impl->output_nr = 0;
  return recorded;
}

// The inputs of an op with a fixed number of them.
template <typename Backward>
Node& record(Tensor& output, const char* name, std::initializer_list<std::reference_wrapper<const Tensor>> inputs,
             Backward&& backward) {
  return record_node(output, name, inputs, std::forward<Backward>(backward));
}

// The inputs of an op that takes a list of tensors (cat, stack): a distinct name, so that a
// braced list can never be read as either.
template <typename Backward>
Node& record_list(Tensor& output, const char* name, const std::vector<Tensor>& inputs, Backward&& backward) {
  return record_node(output, name, inputs, std::forward<Backward>(backward));
}

// Adds `grad` to `accumulator` (out of place: gradients may be shared between branches), after
// checking that shape and dtype agree; `what` names the receiver in the error. Recorded when
// grad mode is on and either requires grad (a pass with create_graph).
void accumulate(Tensor& accumulator, const Tensor& grad, const char* what);

// What one backward pass does.
struct PassOptions {
  bool keep_graph = false;    // retain_graph: the nodes keep what they saved and can run again
  bool create_graph = false;  // record the backward itself (implies grad mode during the pass)
  // When not empty, the pass computes the gradients of these tensors only (and runs only the
  // nodes on a path to them). `accumulate_targets` (backward's `inputs`): into their .grad;
  // otherwise (autograd::grad) they are returned and no .grad is touched.
  std::vector<Tensor> targets{};
  bool accumulate_targets = false;
};

// Runs the backward pass from `roots` with d(roots[i]) = grad_outputs[i]; returns the gradient
// reaching each target (undefined where none did) when targets are given and not accumulated.
std::vector<Tensor> run_backward(std::span<const Tensor> roots, std::span<const Tensor> grad_outputs,
                                 const PassOptions& options);

}  // namespace tg::autograd
