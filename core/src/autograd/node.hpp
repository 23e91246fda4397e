// The tape's node, and how an operation records one. Private to the library.
//
// A node is: one edge per input of the operation (where that input's gradient goes, or nothing),
// what the backward needs saved (captured by value in the backward closure), and that one backward
// function. An operation records its node right where it computes its output:
//
//   Tensor out = ...forward kernel...;
//   if (autograd::needs_grad(a, b))
//     autograd::record(out, "mul", {a, b}, [sa = a.detach(), sb = b.detach()](
//         const Tensor& grad_out, autograd::GradInputs& grads) {
//       if (grads.needed(0)) grads.set(0, grad_out * sb);
//       if (grads.needed(1)) grads.set(1, grad_out * sa);
//     });
//
// Closures must save detached tensors, never `out` itself: the output owns the node, and a node
// that owned its output would never be freed.
#pragma once

#include <array>
#include <atomic>
#include <initializer_list>
#include <string>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "tapegrad/autograd.hpp"
#include "tensor_impl.hpp"

namespace tg::autograd {

struct Node;

// A node's edges, one per input of its op: inline for up to kInline inputs (every op has at most
// three), on the heap beyond, so that recording a node costs one allocation, not two.
class Edges {
 public:
  using Edge = std::shared_ptr<Node>;
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
  void clear() {
    for (Edge& edge : *this) edge.reset();
    heap_.clear();
    heap_.shrink_to_fit();
    size_ = 0;
  }

 private:
  std::array<Edge, kInline> inline_;
  std::vector<Edge> heap_;  // all the edges once there are more than kInline; empty otherwise
  size_t size_ = 0;
};

// The gradients one node sends to its inputs; slot i belongs to the op's i-th input.
class GradInputs {
 public:
  GradInputs(const Edges& edges, std::vector<Tensor>& grads) : edges_(edges), grads_(grads) {}
  bool needed(size_t input) const { return edges_[input] != nullptr; }
  void set(size_t input, Tensor grad) { grads_[input] = std::move(grad); }

 private:
  const Edges& edges_;
  std::vector<Tensor>& grads_;
};

struct Node {
  explicit Node(const char* name);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Computes the gradients of this node's inputs from the gradient of its output.
  virtual void apply(const Tensor& grad_output, GradInputs& grads) = 0;
  // Frees what the backward saved; the node cannot run again afterwards.
  virtual void release() {}

  const char* name;
  Edges next;  // per input: its producer, an AccumulateGrad, or null
  bool released = false;

  // Where the op was recorded (the AnomalyTag path), captured only while anomaly detection is on.
  std::string anomaly_tag;

  // Engine scratch, valid during one backward pass.
  Tensor pending_grad;  // sum of the gradients that reached this node's output
  int64_t dependencies = 0;
  uint64_t visited_in_pass = 0;
};

// The sink for a leaf that requires grad: adds the incoming gradient to leaf.grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  void apply(const Tensor& grad_output, GradInputs& grads) override;
  std::shared_ptr<TensorImpl> leaf;
};

template <typename Backward>
struct FunctionNode final : Node {
  FunctionNode(const char* name, Backward&& backward) : Node(name), backward(std::move(backward)) {}
  void apply(const Tensor& grad_output, GradInputs& grads) override { (*backward)(grad_output, grads); }
  void release() override { backward.reset(); }
  std::optional<Backward> backward;
};

// Where the gradient of `input` must go: its producer, a new AccumulateGrad for a leaf that
// requires grad, or nowhere.
std::shared_ptr<Node> gradient_edge(const Tensor& input);

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

// Makes `output` the result of a new node with one edge per input.
template <typename Backward>
void record(Tensor& output, const char* name, std::initializer_list<std::reference_wrapper<const Tensor>> inputs,
            Backward&& backward) {
  auto node = std::make_shared<FunctionNode<std::decay_t<Backward>>>(name, std::forward<Backward>(backward));
  node->next.reserve(inputs.size());
  for (const Tensor& input : inputs) node->next.push_back(gradient_edge(input));
  if (anomaly_detection_on()) node->anomaly_tag = current_anomaly_tag();
  output.impl()->grad_fn = std::move(node);
}

// Adds `grad` to `accumulator` (out of place: gradients may be shared between branches), after
// checking that shape and dtype agree; `what` names the receiver in the error.
void accumulate(Tensor& accumulator, const Tensor& grad, const char* what);

// Runs the backward pass from `root` with d(root) = grad_output.
void run_backward(const Tensor& root, const Tensor& grad_output);

}  // namespace tg::autograd
