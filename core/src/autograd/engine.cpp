// The reverse pass: one topological sort of the nodes reachable from the root, walked in reverse,
// each node's saved tensors freed as soon as it has run.
#include <atomic>

#include <cmath>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/elementwise.hpp"
#include "parallel_for.hpp"

namespace tg {

namespace {
thread_local bool grad_enabled = true;
std::atomic<int64_t> live_node_count{0};
}  // namespace

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }
bool is_grad_enabled() { return grad_enabled; }

namespace autograd {
std::atomic<bool> anomaly_mode{false};
}  // namespace autograd

namespace {
thread_local std::string anomaly_tag_path;  // "encoder/block 2": the AnomalyTags alive here
}  // namespace

void set_detect_anomaly(bool enabled) { autograd::anomaly_mode.store(enabled, std::memory_order_relaxed); }
bool is_anomaly_enabled() { return autograd::anomaly_detection_on(); }

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
DetectAnomalyGuard::~DetectAnomalyGuard() { set_detect_anomaly(previous_); }

AnomalyTag::AnomalyTag(const std::string& tag) : previous_length_(anomaly_tag_path.size()) {
  if (!anomaly_tag_path.empty()) anomaly_tag_path += '/';
  anomaly_tag_path += tag;
}
AnomalyTag::~AnomalyTag() { anomaly_tag_path.resize(previous_length_); }

namespace autograd {

const std::string& current_anomaly_tag() { return anomaly_tag_path; }

int64_t live_nodes() { return live_node_count.load(std::memory_order_relaxed); }

Node::Node(const char* name) : name(name) { live_node_count.fetch_add(1, std::memory_order_relaxed); }
Node::~Node() {
  live_node_count.fetch_sub(1, std::memory_order_relaxed);
  // A forward pass that never ran backward leaves a chain in which every node owns its
  // predecessor; freeing it recursively would overflow the stack after some 10^5 ops. Take the
  // edges this node holds the last reference to and free them here, one at a time.
  std::vector<std::shared_ptr<Node>> orphans;
  const auto adopt = [&orphans](Edges& edges) {
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
    // The leaf's grad must never alias another tensor. The engine hands over the only handle to a
    // fresh gradient (moved out of pending_grad), so when neither the handle nor its bytes are
    // shared, adopt it as PyTorch does instead of copying M·N values; otherwise copy.
    const std::shared_ptr<TensorImpl>& incoming = grad_output.impl_ptr();
    const bool sole_owner = incoming.use_count() == 1 && incoming->storage.use_count() == 1 &&
                            incoming->grad_fn == nullptr && !incoming->requires_grad && !incoming->grad.defined();
    grad = sole_owner ? grad_output : grad_output.clone();
  } else if (grad.impl_ptr().use_count() == 1 && grad.impl()->storage.use_count() == 1 &&
             grad_output.defined() && grad_output.impl()->storage != grad.impl()->storage &&
             grad_output.shape() == grad.shape() && grad_output.dtype() == grad.dtype()) {
    // Nobody else sees the leaf's grad (no handle from grad(), no view): add in place, which is
    // the same sum, element by element, as the out-of-place add without the new buffer.
    detail::dispatch_floating("backward", grad.dtype(), [&]<typename T>() {
      T* sum = grad.mutable_data<T>();
      const T* addend = grad_output.data<T>();
      detail::parallel_for(grad.numel(), detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) sum[i] = sum[i] + addend[i];
      });
    });
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

// The engine's scratch lists, kept per thread so that a backward pass reuses their capacity
// instead of allocating; always left empty (the order owns nodes, which must not outlive a pass).
struct Scratch {
  std::vector<Node*> reachable;
  std::vector<std::shared_ptr<Node>> ready;
  std::vector<std::shared_ptr<Node>> order;
  std::vector<Tensor> grads;
  bool in_use = false;
};

// Fills `order` with the nodes reachable from `root`, each after every node that feeds gradient
// into it (Kahn's order). The list owns the nodes: edges are cleared while the pass runs.
void topological_order(const std::shared_ptr<Node>& root, Scratch& scratch) {
  static std::atomic<uint64_t> last_pass{0};
  const uint64_t pass = ++last_pass;  // marks the nodes this pass has seen, without a hash set
  std::vector<Node*>& reachable = scratch.reachable;
  reachable.assign(1, root.get());
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

  std::vector<std::shared_ptr<Node>>& order = scratch.order;
  order.reserve(reachable.size());
  reachable.clear();
  std::vector<std::shared_ptr<Node>>& ready = scratch.ready;
  ready.assign(1, root);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    for (const auto& next : node->next)
      if (next && --next->dependencies == 0) ready.push_back(next);
    order.push_back(std::move(node));
  }
}

// Anomaly detection: the first NaN or Inf among the gradients `node` produced is an error that
// names the node and where it was recorded.
void check_finite(const Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const char* problem = detail::dispatch_floating("backward", grads[i].dtype(), [&]<typename T>() -> const char* {
      const T* values = grads[i].data<T>();
      for (int64_t j = 0; j < grads[i].numel(); ++j) {
        if (std::isnan(values[j])) return "a NaN";
        if (std::isinf(values[j])) return "an Inf";
      }
      return nullptr;
    });
    check(problem == nullptr, "backward", "anomaly: ", node.name, " produced ", problem ? problem : "",
          " gradient for its input ", i, " (shape ", grads[i].shape(), "); the operation was recorded ",
          node.anomaly_tag.empty() ? std::string("outside any tg::AnomalyTag") : "in '" + node.anomaly_tag + "'");
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_output) {
  NoGradGuard no_grad;  // gradients are computed, not recorded
  const std::shared_ptr<Node> root_node = gradient_edge(root);
  check(root_node != nullptr, "backward", "the tensor of shape ", root.shape(),
        " does not require grad and has no grad_fn");
  root_node->pending_grad = grad_output;

  // This thread's scratch lists, or fresh ones if a backward runs inside a backward.
  thread_local Scratch thread_scratch;
  Scratch local_scratch;
  Scratch& scratch = thread_scratch.in_use ? local_scratch : thread_scratch;
  struct Release {  // empties the lists however the pass ends, so no node outlives it
    Scratch& scratch;
    bool was_in_use;
    ~Release() {
      scratch.reachable.clear();
      scratch.ready.clear();
      scratch.order.clear();
      scratch.grads.clear();
      scratch.in_use = was_in_use;
    }
  } release{scratch, scratch.in_use};
  scratch.in_use = true;

  topological_order(root_node, scratch);
  std::vector<Tensor>& grads = scratch.grads;
  for (std::shared_ptr<Node>& node : scratch.order) {
    Tensor grad = std::move(node->pending_grad);
    node->pending_grad = Tensor();
    grads.assign(node->next.size(), Tensor());
    GradInputs sink(node->next, grads);
    if (grad.defined()) node->apply(grad, sink);
    if (anomaly_detection_on()) check_finite(*node, grads);
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
    node.reset();  // and the node itself, if nothing else holds it
  }
}

}  // namespace autograd
}  // namespace tg
