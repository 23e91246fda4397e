// The reverse pass: one topological sort of the nodes reachable from the root, walked in reverse,
// each node's saved tensors freed as soon as it has run.
#include <atomic>

#include "autograd/node.hpp"
#include "ops/elementwise.hpp"

namespace tg {

namespace {
thread_local bool grad_enabled = true;
std::atomic<int64_t> live_node_count{0};
}  // namespace

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }
bool is_grad_enabled() { return grad_enabled; }

namespace autograd {

int64_t live_nodes() { return live_node_count.load(std::memory_order_relaxed); }

Node::Node(const char* name) : name(name) { live_node_count.fetch_add(1, std::memory_order_relaxed); }
Node::~Node() {
  live_node_count.fetch_sub(1, std::memory_order_relaxed);
  // A forward pass that never ran backward leaves a chain in which every node owns its
  // predecessor; freeing it recursively would overflow the stack after some 10^5 ops. Take the
  // edges this node holds the last reference to and free them here, one at a time.
  std::vector<std::shared_ptr<Node>> orphans;
  const auto adopt = [&orphans](std::vector<std::shared_ptr<Node>>& edges) {
    for (std::shared_ptr<Node>& edge : edges)
      if (edge && edge.use_count() == 1) orphans.push_back(std::move(edge));
    edges.clear();
  };
  adopt(next);
  while (!orphans.empty()) {
    std::shared_ptr<Node> node = std::move(orphans.back());
    orphans.pop_back();
    adopt(node->next);  // node is destroyed at the end of this iteration, with no edges left
  }
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node("AccumulateGrad"), leaf(std::move(leaf)) {}

void AccumulateGrad::apply(const Tensor& grad_output, GradInputs&) {
  Tensor& grad = leaf->grad;
  if (!grad.defined()) {
    // The leaf owns its gradient: the incoming tensor may be shared with other branches.
    check(grad_output.shape() == leaf->shape && grad_output.dtype() == leaf->dtype, "backward",
          "gradient of shape ", grad_output.shape(), " (", grad_output.dtype(), ") for a leaf of shape ",
          leaf->shape, " (", leaf->dtype, ")");
    grad = grad_output.clone();
  } else {
    accumulate(grad, grad_output, "leaf gradient");
  }
}

std::shared_ptr<Node> gradient_edge(const Tensor& input) {
  TensorImpl* impl = input.impl();
  if (impl->grad_fn) return impl->grad_fn;
  if (impl->requires_grad) return std::make_shared<AccumulateGrad>(input.impl_ptr());
  return nullptr;
}

void accumulate(Tensor& accumulator, const Tensor& grad, const char* what) {
  check(accumulator.shape() == grad.shape() && accumulator.dtype() == grad.dtype(), "backward",
        "cannot add a gradient of shape ", grad.shape(), " (", grad.dtype(), ") to a ", what, " of shape ",
        accumulator.shape(), " (", accumulator.dtype(), ")");
  accumulator = detail::add_same_shape(accumulator, grad);
}

namespace {

// Nodes reachable from `root`, each after every node that feeds gradient into it (Kahn's order).
// The list owns the nodes: edges are cleared while the pass runs.
std::vector<std::shared_ptr<Node>> topological_order(const std::shared_ptr<Node>& root) {
  static std::atomic<uint64_t> last_pass{0};
  const uint64_t pass = ++last_pass;  // marks the nodes this pass has seen, without a hash set
  std::vector<Node*> reachable{root.get()};
  root->visited_in_pass = pass;
  for (size_t i = 0; i < reachable.size(); ++i) {
    Node* node = reachable[i];
    check(!node->released, "backward",
          "trying to backward through the graph a second time (its saved tensors were freed after the "
          "first backward); recompute the forward pass");
    node->dependencies = 0;
    for (const auto& next : node->next) {
      if (next && next->visited_in_pass != pass) {
        next->visited_in_pass = pass;
        reachable.push_back(next.get());
      }
    }
  }
  for (Node* node : reachable)
    for (const auto& next : node->next)
      if (next) ++next->dependencies;

  std::vector<std::shared_ptr<Node>> order;
  order.reserve(reachable.size());
  std::vector<std::shared_ptr<Node>> ready{root};
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    for (const auto& next : node->next)
      if (next && --next->dependencies == 0) ready.push_back(next);
    order.push_back(std::move(node));
  }
  return order;
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_output) {
  NoGradGuard no_grad;  // gradients are computed, not recorded
  const std::shared_ptr<Node> root_node = gradient_edge(root);
  check(root_node != nullptr, "backward", "the tensor of shape ", root.shape(),
        " does not require grad and has no grad_fn");
  root_node->pending_grad = grad_output;

  std::vector<Tensor> grads;
  for (const std::shared_ptr<Node>& node : topological_order(root_node)) {
    Tensor grad = std::move(node->pending_grad);
    node->pending_grad = Tensor();
    grads.assign(node->next.size(), Tensor());
    GradInputs sink(node->next, grads);
    if (grad.defined()) node->apply(grad, sink);
    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* next = node->next[i].get();
      if (!next || !grads[i].defined()) continue;
      if (next->pending_grad.defined())
        accumulate(next->pending_grad, grads[i], node->name);
      else
        next->pending_grad = std::move(grads[i]);
    }
    // Free the saved tensors and the edges now: the rest of the graph is released as we go.
    node->release();
    node->released = true;
    node->next.clear();
  }
}

}  // namespace autograd
}  // namespace tg
