// The reverse pass: one topological sort of the nodes reachable from the root, walked in reverse,
// each node's saved tensors freed as soon as it has run.
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>

#include "autocast_policy.hpp"
#include "autograd/node.hpp"
#include "autograd/pass_op.hpp"
#include "dispatch.hpp"
#include "map.hpp"
#include "ops/matmul_precision.hpp"
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

namespace {
thread_local const char* pass_op = "backward";  // pass_op.hpp
}  // namespace

const char* current_pass_op() { return pass_op; }
NamedPass::NamedPass(const char* op) : previous_(pass_op) { pass_op = op; }
NamedPass::~NamedPass() { pass_op = previous_; }

const std::string& current_anomaly_tag() { return anomaly_tag_path; }

int64_t live_nodes() { return live_node_count.load(std::memory_order_relaxed); }

Node::Node(const char* name, bool is_accumulator)
    : name(name), is_accumulator(is_accumulator), products_in_bf16(tg::detail::forced_bf16_products()) {
  if (!is_accumulator) live_node_count.fetch_add(1, std::memory_order_relaxed);
}

Node::~Node() {
  if (!is_accumulator) live_node_count.fetch_sub(1, std::memory_order_relaxed);
  // A forward pass that never ran backward leaves a chain in which every node owns its
  // predecessor; freeing it recursively would overflow the stack after some 10^5 ops. Take the
  // edges this node holds the last reference to and free them here, one at a time, on a stack
  // linked through the nodes themselves: a destructor must not allocate (an allocation failure
  // here would terminate the process). An edge that is not the last reference is dropped at once,
  // which frees nothing but may make a second edge to the same node (y * y) the last one.
  std::shared_ptr<Node> orphans;
  const auto adopt = [&orphans](Edges& edges) noexcept {
    for (Edge& edge_to : edges) {
      std::shared_ptr<Node>& edge = edge_to.function;
      if (edge && edge.use_count() == 1) {
        edge->next_orphan_ = std::move(orphans);
        orphans = std::move(edge);
      } else {
        edge.reset();
      }
    }
    edges.clear();
  };
  adopt(next);
  while (orphans) {
    std::shared_ptr<Node> node = std::move(orphans);
    orphans = std::move(node->next_orphan_);
    adopt(node->next);  // node is destroyed at the end of this iteration, with no edges left
  }
}

std::mutex& grad_mutex(const TensorImpl* impl) {
  static std::array<std::mutex, 64> stripes;
  return stripes[(reinterpret_cast<uintptr_t>(impl) / alignof(TensorImpl)) % stripes.size()];
}

bool GradInputs::needed(size_t input) const { return static_cast<bool>(node_->next[input]); }

// A constant (no grad_fn, no requires_grad: an intermediate of a fused kernel, a mask) has no
// autograd state to cut, so it is kept as it is, without the detached view's allocation.
SavedTensor::SavedTensor(const Tensor& tensor, Kind kind, uint32_t output_nr)
    : tensor_(kind == kOutput || tensor.requires_grad() ? tensor.detach() : tensor),
      version_(tg::detail::impl_of(tensor)->storage->version),
      output_nr_(output_nr),
      kind_(kind) {
  if (kind == kOutput) return;
  const TensorImpl* impl = tg::detail::impl_of(tensor);
  if (impl->grad_fn) {
    producer_ = impl->grad_fn;
    output_nr_ = impl->output_nr;
  } else if (impl->requires_grad) {
    leaf_ = tg::detail::impl_ptr_of(tensor);
  }
}

Tensor GradInputs::unpack(const SavedTensor& saved) const {
  const TensorImpl& impl = *tg::detail::impl_of(saved.tensor_);
  check(impl.storage->version == saved.version_, pass_op, "a ", impl.dtype, " tensor of shape ", impl.shape,
        " that ", node_->name, " saved for the gradient was modified by an in-place operation: it is at version ",
        impl.storage->version, ", expected version ", saved.version_,
        ". Don't write to a tensor (fill_, copy_, optimizer.step(), ...) between the forward pass that uses it "
        "and backward");
  if (!create_graph_) return saved.tensor_;
  // A recorded backward differentiates through what was saved: the leaf itself, or the same bytes
  // as the output of their producer.
  if (std::shared_ptr<TensorImpl> leaf = saved.leaf_.lock()) return tg::detail::TensorAccess::wrap(std::move(leaf));
  std::shared_ptr<Node> producer = saved.kind_ == SavedTensor::kOutput ? node_ : saved.producer_.lock();
  if (!producer) return saved.tensor_;  // a constant of the backward
  auto attached = std::make_shared<TensorImpl>();
  attached->shape = impl.shape;
  attached->numel = impl.numel;
  attached->dtype = impl.dtype;
  attached->storage = impl.storage;
  attached->grad_fn = std::move(producer);
  attached->output_nr = saved.output_nr_;
  return tg::detail::TensorAccess::wrap(std::move(attached));
}

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf)
    : Node("AccumulateGrad", /*is_accumulator=*/true), leaf(leaf) {}

void AccumulateGrad::apply(const Tensor& grad_output, GradInputs&) {
  const std::shared_ptr<TensorImpl> impl = leaf.lock();
  if (!impl) return;
  std::mutex& mutex = grad_mutex(impl.get());
  Tensor previous;
  {
    const std::lock_guard lock(mutex);
    previous = impl->grad;
  }
  Tensor updated;
  if (!previous.defined()) {
    // The leaf owns its gradient: the incoming tensor may be shared with other branches.
    check(grad_output.shape() == impl->shape && grad_output.dtype() == impl->dtype, pass_op,
          "gradient of shape ", grad_output.shape(), " (", grad_output.dtype(), ") for a leaf of shape ",
          impl->shape, " (", impl->dtype, ")");
    // The leaf's grad must never alias another tensor. The engine hands over the only handle to a
    // fresh gradient (moved out of pending_grad), so when neither the handle nor its bytes are
    // shared, adopt it as PyTorch does instead of copying M·N values; otherwise copy.
    const std::shared_ptr<TensorImpl>& incoming = tg::detail::impl_ptr_of(grad_output);
    const bool sole_owner = incoming.use_count() == 1 && incoming->storage.use_count() == 1 &&
                            incoming->grad_fn == nullptr && !incoming->requires_grad && !incoming->grad.defined();
    updated = sole_owner ? grad_output : grad_output.clone();
  } else {
    // Out of place, never into the stored gradient: a thread that read grad() keeps a consistent
    // snapshot, and a failed pass can put the previous gradient back.
    updated = previous;
    accumulate(updated, grad_output, "leaf gradient");
  }
  grad_before_pass = std::move(previous);
  changed_in_pass = true;
  {
    const std::lock_guard lock(mutex);
    impl->grad = std::move(updated);
  }
  // The leaf's gradient is final for this pass: one accumulator per leaf runs once per pass.
  if (post_accumulate_hooks) {
    const Tensor leaf_tensor = tg::detail::TensorAccess::wrap(impl);
    const auto hooks = post_accumulate_hooks->hooks;  // a copy: a hook may remove itself
    for (const auto& [id, hook] : hooks) hook(leaf_tensor);
  }
}

void AccumulateGrad::end_pass(bool failed) {
  if (failed && changed_in_pass) {
    if (const std::shared_ptr<TensorImpl> impl = leaf.lock()) {
      const std::lock_guard lock(grad_mutex(impl.get()));
      impl->grad = std::move(grad_before_pass);
    }
  }
  grad_before_pass = Tensor();
  changed_in_pass = false;
}

const std::shared_ptr<AccumulateGrad>& grad_accumulator_ptr(const Tensor& leaf) {
  TensorImpl* impl = tg::detail::impl_of(leaf);
  // Locked: threads that record ops on a shared parameter must agree on its one accumulator.
  const std::lock_guard lock(grad_mutex(impl));
  if (!impl->grad_accumulator) impl->grad_accumulator = std::make_shared<AccumulateGrad>(tg::detail::impl_ptr_of(leaf));
  return impl->grad_accumulator;
}

AccumulateGrad& grad_accumulator(const Tensor& leaf) { return *grad_accumulator_ptr(leaf); }

Edge gradient_edge(const Tensor& input) {
  TensorImpl* impl = tg::detail::impl_of(input);
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr};
  if (impl->requires_grad) {
    grad_accumulator(input);
    return Edge{impl->grad_accumulator, 0};
  }
  return Edge{};
}

void make_output_edge(Tensor& output, std::shared_ptr<Node> node, uint32_t output_nr) {
  TensorImpl* impl = tg::detail::impl_of(output);
  impl->grad_fn = std::move(node);
  impl->output_nr = output_nr;
}

void accumulate(Tensor& accumulator, const Tensor& grad, const char* what) {
  check(accumulator.shape() == grad.shape() && accumulator.dtype() == grad.dtype(), pass_op,
        "cannot add a gradient of shape ", grad.shape(), " (", grad.dtype(), ") to a ", what, " of shape ",
        accumulator.shape(), " (", accumulator.dtype(), ")");
  if (is_grad_enabled() && (accumulator.requires_grad() || grad.requires_grad()))
    accumulator = accumulator + grad;  // a recorded backward: the sum is differentiated too
  else
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
  std::vector<Tensor> outputs;
  bool in_use = false;
};

// The pass's one root: it hands each root tensor its seed gradient, so that a pass from several
// tensors (autograd::grad, autograd::backward) is a pass from one node.
struct GraphRoot final : Node {
  explicit GraphRoot(std::vector<Tensor> seeds) : Node("GraphRoot"), seeds(std::move(seeds)) {}
  void apply(const Tensor&, GradInputs& grads) override {
    for (size_t i = 0; i < seeds.size(); ++i) grads.set(i, seeds[i]);
  }
  std::vector<Tensor> seeds;
};

// Fills `order` with the nodes reachable from `root`, each after every node that feeds gradient
// into it (Kahn's order). The list owns the nodes until the pass ends: edges are cleared while it
// runs.
void topological_order(const std::shared_ptr<Node>& root, Scratch& scratch, uint64_t pass) {
  std::vector<Node*>& reachable = scratch.reachable;
  reachable.assign(1, root.get());
  root->visited_in_pass = pass;
  for (size_t i = 0; i < reachable.size(); ++i) {
    Node* node = reachable[i];
    check(!node->failed, pass_op,
          "a previous backward through this part of the graph failed after it had released it; recompute "
          "the forward pass");
    check(!node->released, pass_op, "trying to backward through ", node->name,
          " a second time (its saved tensors were freed after the first backward); recompute the forward pass, "
          "or pass retain_graph = true to the first backward");
    node->dependencies = 0;
    for (const Edge& next : node->next) {
      if (next && next.function->visited_in_pass != pass) {
        next.function->visited_in_pass = pass;
        reachable.push_back(next.function.get());
      }
    }
  }
  for (Node* node : reachable)
    for (const Edge& next : node->next)
      if (next) ++next.function->dependencies;

  std::vector<std::shared_ptr<Node>>& order = scratch.order;
  order.reserve(reachable.size());
  reachable.clear();
  std::vector<std::shared_ptr<Node>>& ready = scratch.ready;
  ready.assign(1, root);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    for (const Edge& next : node->next)
      if (next && --next.function->dependencies == 0) ready.push_back(next.function);
    order.push_back(std::move(node));
  }
}

// Whether one of the node's inputs leads to a target of the pass.
bool feeds_needed_node(const Node& node) {
  for (const Edge& next : node.next)
    if (next && next.function->needed_in_pass) return true;
  return false;
}

// With targets, a node is needed when it is a target or a target is reachable from it. Walks the
// order from the leaves up.
void mark_needed(const std::vector<std::shared_ptr<Node>>& order, uint64_t pass) {
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = **it;
    node.needed_in_pass = node.target_in_pass == pass || feeds_needed_node(node);
  }
}

// Anomaly detection: the first NaN or Inf among the gradients `node` produced is an error that
// names the node and where it was recorded.
void check_finite(const Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    using GradientDTypes = detail::DTypes<kFloat32, kFloat64, kBFloat16>;
    const char* problem = detail::dispatch<GradientDTypes>(pass_op, grads[i].dtype(), [&]<typename T>() -> const char* {
      const T* values = grads[i].data<T>();
      for (int64_t j = 0; j < grads[i].numel(); ++j) {
        if (std::isnan(values[j])) return "a NaN";
        if (std::isinf(values[j])) return "an Inf";
      }
      return nullptr;
    });
    check(problem == nullptr, pass_op, "anomaly: ", node.name, " produced ", problem ? problem : "",
          " gradient for its input ", i, " (shape ", grads[i].shape(), "); the operation was recorded ",
          node.anomaly_tag.empty() ? std::string("outside any tg::AnomalyTag") : "in '" + node.anomaly_tag + "'");
  }
}

// A non-leaf's .grad (retain_grad, or one of backward's inputs) receives `grad`: its own copy when
// nothing is recorded (the gradient flows on and may be summed into), added to what it holds.
void add_to_grad(TensorImpl& impl, const Tensor& grad) {
  const std::lock_guard lock(grad_mutex(&impl));
  if (!impl.grad.defined())
    impl.grad = grad.requires_grad() ? grad : grad.clone();
  else
    accumulate(impl.grad, grad, "non-leaf gradient");
}

// Runs the gradient hooks registered on one output, in registration order; each may replace the
// gradient with one of the same shape and dtype. Then a non-leaf that retains its gradient gets it.
Tensor run_output_hooks(const OutputHooks& output, Tensor grad, bool store_retained) {
  if (output.hooks) {
    const auto hooks = output.hooks->hooks;  // a copy: a hook may remove itself
    for (const auto& [id, hook] : hooks) {
      Tensor replaced = hook(grad);
      if (!replaced.defined()) continue;
      check(replaced.shape() == grad.shape() && replaced.dtype() == grad.dtype(), pass_op,
            "a hook on the gradient of shape ", grad.shape(), " (", grad.dtype(), ") returned one of shape ",
            replaced.shape(), " (", replaced.dtype(), ")");
      grad = std::move(replaced);
    }
  }
  if (store_retained)
    if (const std::shared_ptr<TensorImpl> impl = output.retains_grad.lock()) add_to_grad(*impl, grad);
  return grad;
}

// One pass's state beyond the nodes' scratch fields.
struct Pass {
  const PassOptions& options;
  uint64_t id;
  bool has_targets;
  std::vector<Edge> target_edges;
  std::vector<Tensor> captured;  // per target: the gradient that reached it
};

void run_node(const std::shared_ptr<Node>& node_ptr, Scratch& scratch, Pass& pass) {
  Node& node = *node_ptr;
  if (pass.has_targets && !node.needed_in_pass && node.target_in_pass != pass.id) {
    for (uint32_t slot = 0; slot < node.num_outputs; ++slot) node.pending(slot) = Tensor();
    return;
  }
  std::vector<Tensor>& outputs = scratch.outputs;
  outputs.assign(node.num_outputs, Tensor());
  bool any = false;
  for (uint32_t slot = 0; slot < node.num_outputs; ++slot) {
    outputs[slot] = std::move(node.pending(slot));
    node.pending(slot) = Tensor();
    if (!outputs[slot].defined()) continue;
    any = true;
    if (slot < node.output_hooks.size())
      outputs[slot] = run_output_hooks(node.output_hooks[slot], std::move(outputs[slot]),
                                       !pass.has_targets || pass.options.accumulate_targets);
  }
  if (node.target_in_pass == pass.id) {
    for (size_t t = 0; t < pass.target_edges.size(); ++t) {
      const Edge& target = pass.target_edges[t];
      if (target.function.get() != &node || !outputs[target.input_nr].defined()) continue;
      if (pass.options.accumulate_targets && !node.is_accumulator) {
        // backward(inputs = {non-leaf}): the gradient accumulates into that tensor's .grad.
        add_to_grad(*tg::detail::impl_of(pass.options.targets[t]), outputs[target.input_nr]);
      } else if (!pass.options.accumulate_targets) {
        pass.captured[t] = outputs[target.input_nr];
      }
    }
    // Beyond a target, run only towards other targets; a leaf's accumulator, only into its .grad.
    if (node.is_accumulator ? !pass.options.accumulate_targets : !feeds_needed_node(node)) return;
  }
  std::vector<Tensor>& grads = scratch.grads;
  grads.assign(node.next.size(), Tensor());
  if (any) {
    check(!(pass.options.create_graph && node.once_differentiable), pass_op, node.name,
          " is once differentiable: its gradient cannot be differentiated again, so a backward with "
          "create_graph = true cannot run through it");
    GradInputs sink(node_ptr, grads, pass.options.create_graph);
    // A recorded backward (create_graph) may multiply float32 values: its products round their factors.
    using tg::detail::Bf16Products;
    const tg::detail::ForceBf16Products products(
        pass.options.create_graph && node.products_in_bf16 == Bf16Products::factors_exact ? Bf16Products::round_factors
                                                                                         : node.products_in_bf16);
    if (node.num_outputs == 1)
      node.apply(outputs[0], sink);
    else
      node.apply_multi(outputs, sink);
  }
  outputs.clear();
  if (anomaly_detection_on()) check_finite(node, grads);
  for (size_t i = 0; i < node.next.size(); ++i) {
    const Edge& next = node.next[i];
    if (!next || !grads[i].defined()) continue;
    Tensor& pending = next.function->pending(next.input_nr);
    if (pending.defined())
      accumulate(pending, grads[i], node.name);
    else
      pending = std::move(grads[i]);
  }
  if (!node.is_accumulator && !pass.options.keep_graph) {
    // Free the saved tensors and the edges now: the rest of the graph is released as we go.
    node.release();
    node.released = true;
    node.next.clear();
  }
}

}  // namespace

std::vector<Tensor> run_backward(std::span<const Tensor> roots, std::span<const Tensor> grad_outputs,
                                 const PassOptions& options) {
  check(!options.create_graph || is_grad_enabled(), pass_op,
        "create_graph = true inside a tg::NoGradGuard: the backward pass would not be recorded; drop the guard "
        "(or create_graph)");
  // Gradients are computed, not recorded — unless the backward itself is to be differentiated.
  std::optional<NoGradGuard> no_grad;
  if (!options.create_graph) no_grad.emplace();
  // Each backward op runs in its forward's dtypes, also when backward is called under tg::autocast.
  const tg::detail::AutocastSuspended no_autocast;

  static std::atomic<uint64_t> last_pass{0};
  const uint64_t pass_id = ++last_pass;  // marks the nodes this pass has seen, without a hash set
  Pass pass{options, pass_id, !options.targets.empty(), {}, {}};
  for (const Tensor& tensor : roots)
    check(tensor.requires_grad(), pass_op, "the tensor of shape ", tensor.shape(),
          " does not require grad and has no grad_fn");
  // One root and no targets (loss.backward()): the pass starts at the root's own node. Otherwise a
  // GraphRoot seeds every root.
  std::shared_ptr<Node> root;
  uint32_t root_slot = 0;
  if (roots.size() == 1 && !pass.has_targets) {
    Edge edge = gradient_edge(roots[0]);
    root = std::move(edge.function);
    root_slot = edge.input_nr;
  } else {
    root = std::make_shared<GraphRoot>(std::vector<Tensor>(grad_outputs.begin(), grad_outputs.end()));
    root->next.reserve(roots.size());
    for (const Tensor& tensor : roots) root->next.push_back(gradient_edge(tensor));
  }
  for (const Tensor& target : options.targets) {
    Edge edge = gradient_edge(target);
    check(static_cast<bool>(edge), pass_op, "one of the inputs (shape ", target.shape(),
          ") does not require grad: there is no gradient of it to compute");
    edge.function->target_in_pass = pass_id;
    pass.target_edges.push_back(std::move(edge));
  }
  pass.captured.resize(options.targets.size());

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
      scratch.outputs.clear();
      scratch.in_use = was_in_use;
    }
  } release{scratch, scratch.in_use};
  scratch.in_use = true;

  topological_order(root, scratch, pass_id);
  if (pass.has_targets) mark_needed(scratch.order, pass_id);
  root->pending(root_slot) = grad_outputs[0];
  root->needed_in_pass = true;
  try {
    for (const std::shared_ptr<Node>& node : scratch.order) run_node(node, scratch, pass);
  } catch (...) {
    // Leave nothing half done: the gradients pending on nodes that did not run are dropped
    // (a later backward must not add them) and every leaf's grad is put back as it was before
    // this pass. The nodes that did not run stay usable; those that ran were released, and a
    // backward that reaches them says that this pass failed.
    for (const std::shared_ptr<Node>& node : scratch.order) {
      for (uint32_t slot = 0; slot < node->num_outputs; ++slot) node->pending(slot) = Tensor();
      node->end_pass(/*failed=*/true);
      node->failed = node->released;
    }
    throw;
  }
  for (const std::shared_ptr<Node>& node : scratch.order) node->end_pass(/*failed=*/false);
  return std::move(pass.captured);
}

}  // namespace autograd
}  // namespace tg
