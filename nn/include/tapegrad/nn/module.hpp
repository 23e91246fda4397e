/// @file
/// tg::nn::Module and tg::nn::Parameter — the building blocks of every model.
///
/// A module owns named parameters, named buffers (state that is not trained, such as BatchNorm's
/// running statistics) and named child modules and declares them in one override, `members`, which
/// every generic operation (parameters(), named_parameters(), buffers(), state_dict(), zero_grad(),
/// to(), train()) walks recursively with PyTorch's dotted names ("lin.weight", "0.bias"):
///
/// @code
///   struct Block : tg::nn::Module {
///     tg::nn::Linear lin{4, 8};
///     tg::nn::LayerNorm ln{{8}};
///     void members(tg::nn::Members& m) override { m.module("lin", lin); m.module("ln", ln); }
///     tg::Tensor forward(const tg::Tensor& x) override { return ln(lin(x)); }
///   };
/// @endcode
///
/// Nothing is registered by pointer, so modules stay plain values that can be copied and moved
/// (into a Sequential, say). A copy shares its parameters' and buffers' tensors with the original,
/// as a copied torch::nn::ModuleHolder does.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::nn {

class Members;
class Module;

/// A parameter slot of a module: a leaf tensor that requires grad and whose identity never changes.
///
/// Assigning a tensor to a parameter copies the new values INTO the existing storage (same shape
/// and dtype, else tg::Error), so the module, the handles returned by parameters() and an
/// optimizer built from them all keep seeing the same tensor:
///
/// @code
///   tg::Tensor w = lin.weight;              // a handle, like optimizer.params[0]
///   lin.weight = tg::zeros({6, 5});         // copies zeros into lin.weight's storage
///   // w, lin.parameters()[0] and the optimizer now all read zeros
/// @endcode
///
/// This is the libtorch pitfall (`lin->weight = t` silently detaching the parameter from the
/// module and the optimizer) made impossible. Module::to(dtype) keeps the identity too: the same
/// tensor then holds new storage of the new dtype, so an optimizer built before to() goes on
/// training it. (Assigning through a `tg::Tensor&` that refers to a Parameter rebinds the handle
/// like any Tensor assignment; don't.)
class Parameter : public Tensor {
 public:
  Parameter() = default;  ///< an absent parameter (Linear's bias with bias = false)
  /// `name` labels the slot in error messages ("Linear.weight"); an undefined `value` makes an
  /// absent parameter. A defined value becomes a leaf that requires grad (sharing its storage).
  Parameter(std::string name, const Tensor& value);
  Parameter(const Parameter&) = default;  ///< shares the tensor: a copied module shares parameters
  Parameter(Parameter&&) = default;  ///< takes over the slot
  ~Parameter() = default;

  Parameter& operator=(const Tensor& values);  ///< copies values in; see above
  /// Copies values in.
  Parameter& operator=(const Parameter& values) { return *this = static_cast<const Tensor&>(values); }

  const std::string& label() const { return label_; }  ///< the slot's name in errors ("Linear.weight")

  /// Weight tying: from now on this slot holds `other`'s tensor itself (one handle identity, so one
  /// storage, one grad, one set of hooks), as `head.weight = wte.weight` does in PyTorch:
  ///
  /// @code
  ///   tg::nn::Embedding wte(vocab, dim);
  ///   tg::nn::Linear lm_head(dim, vocab, {.bias = false});
  ///   lm_head.weight.tie(wte.weight);  // both [vocab, dim]; gradients of both uses add up
  /// @endcode
  ///
  /// A module holding both lists the tensor once in parameters() and named_parameters() (under its
  /// first name, as PyTorch's remove_duplicate), so an optimizer built afterwards steps it once;
  /// state_dict() has both names; a checkpoint stores it once (checkpoint.hpp). Tie before building
  /// the optimizer: a handle taken before tie() still refers to the slot's old tensor. Both
  /// parameters must be present and of the same shape and dtype, else tg::Error.
  void tie(const Parameter& other);

 private:
  std::string label_;
};

/// The visitor a module declares its members to (see Module::members). Users only call its three
/// functions; the walks behind parameters(), to(), train()... are internal.
class Members {
 public:
  void parameter(const std::string& name, Parameter& parameter);  ///< declares a parameter of this module
  /// Declares a buffer of this module, PyTorch's `register_buffer(name, tensor)`: state saved in
  /// state_dict() and checkpoints and converted by to(), but not a parameter (no gradient, not in
  /// parameters(), not stepped by an optimizer). An undefined tensor is an absent buffer (PyTorch's
  /// `register_buffer(name, None)`), skipped by every walk. A module's buffers come after the
  /// parameters it declares before its first child, as PyTorch orders a state dict (a module's
  /// parameters, its buffers, then its children). Code that updates a buffer (running statistics)
  /// writes into its storage, so copies of the module and state_dict() views see the new values;
  /// assigning another tensor to the member replaces the buffer.
  void buffer(const std::string& name, Tensor& buffer);
  void module(const std::string& name, Module& child);            ///< declares a child module

  struct Visitor;  // defined in module.cpp

 private:
  friend class Module;
  Members(Visitor& visitor, std::string prefix) : visitor_(visitor), prefix_(std::move(prefix)) {}
  void flush_buffers();  // reports the buffers declared so far (before a child, and at the end)
  Visitor& visitor_;
  std::string prefix_;  // "" for the root, "0." or "block.lin." below it
  std::vector<std::pair<std::string, Tensor*>> pending_buffers_;  // declared, not yet reported
};

/// A model's state as PyTorch's `module.state_dict()` gives it: an ordered map from dotted names
/// ("0.weight", "1.running_mean") to tensors: each module's parameters, then its buffers, then its
/// children's, in declaration order (see Members::buffer).
///
/// @code
///   tg::nn::StateDict best = model.state_dict();   // detached views of the live parameters
///   for (auto& [name, t] : best) t = t.clone();    // a snapshot that later steps leave alone
///   ...
///   model.load_state_dict(best);                    // copies the values back in
/// @endcode
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;  ///< a name and its tensor

  StateDict() = default;  ///< no keys
  /// sd[name] = tensor in PyTorch: replaces the tensor of an existing name in its place, or
  /// appends the name at the end.
  void insert(const std::string& name, Tensor tensor);
  /// Whether `name` is a key.
  bool contains(const std::string& name) const;
  /// The tensor under `name`; tg::Error naming the key (and the keys present) when there is none.
  const Tensor& at(const std::string& name) const;
  /// The tensor under `name`, to replace or edit; tg::Error as the const overload.
  Tensor& at(const std::string& name);
  /// Removes `name`; returns whether it was present.
  bool erase(const std::string& name);
  /// The keys in order.
  std::vector<std::string> keys() const;
  size_t size() const { return entries_.size(); }  ///< the number of keys
  bool empty() const { return entries_.empty(); }  ///< whether there are no keys

  /// The entries in order, as (name, tensor) pairs; the tensors may be replaced, not the names.
  std::vector<Entry>::iterator begin() { return entries_.begin(); }
  std::vector<Entry>::iterator end() { return entries_.end(); }           ///< see begin()
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }  ///< see begin()
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }      ///< see begin()

 private:
  const Entry* find(const std::string& name) const;
  std::vector<Entry> entries_;
};

/// What Module::load_state_dict(state_dict, false) could not match, as PyTorch's
/// `_IncompatibleKeys`: the module's names the state dict lacks, and its names the module lacks.
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;     ///< in the module, not in the state dict
  std::vector<std::string> unexpected_keys;  ///< in the state dict, not in the module
};

namespace detail {
struct ModuleHooks;  // module.cpp
/// Python's `copy.deepcopy` of a module's parameters and buffers: each slot of `module` (a copy,
/// which shares the original's tensors) gets a fresh tensor holding the same values (a leaf for a
/// parameter); slots tied to each other stay tied to each other. Used by containers that clone a
/// prototype (TransformerEncoder).
void give_own_parameters(Module& module);
}

namespace detail {
/// A flag that one or several threads may set, copied by value with the module holding it
/// (Module's record that its forward was checked for undeclared parameters).
class SetOnce {
 public:
  SetOnce() = default;  ///< not set
  SetOnce(const SetOnce& other) : set_(other.is_set()) {}  ///< the other's state
  /// The other's state.
  SetOnce& operator=(const SetOnce& other) {
    set_.store(other.is_set(), std::memory_order_relaxed);
    return *this;
  }
  bool is_set() const { return set_.load(std::memory_order_relaxed); }  ///< whether set() was called
  void set() { set_.store(true, std::memory_order_relaxed); }           ///< from now on is_set()

 private:
  std::atomic<bool> set_{false};
};
}  // namespace detail

/// A hook run before forward: returns a replacement input, or an undefined Tensor to keep it.
using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
/// A hook run after forward: returns a replacement output, or an undefined Tensor to keep it.
using ForwardHook = std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;

/// The base of every model and layer: named parameters, named children and a forward (module.hpp).
class Module {
 public:
  Module() = default;
  Module(const Module&) = default;  ///< shares the parameters and the hooks
  Module(Module&&) = default;       ///< takes over the parameters and the hooks
  /// Assigning a module copies parameter values into this module's parameters (see Parameter).
  /// Both must declare the same parameters (names, presence, shapes, dtypes); this is checked for
  /// the whole tree before anything is copied, so a refused assignment changes nothing. Hooks stay.
  Module& operator=(const Module& other);
  Module& operator=(Module&& other) { return *this = static_cast<const Module&>(other); }  ///< as the copy assignment
  virtual ~Module() = default;

  virtual Tensor forward(const Tensor& x) = 0;  ///< the module's computation; call it through operator()
  /// forward(x) between the forward-pre hooks and the forward hooks. The first call that records a
  /// graph also checks that forward reached no parameter the module forgot to declare: a parameter
  /// (of a child module left out of members(), say) that the output depends on, other than through
  /// x, that is neither in this module's parameters() nor listed by any module's parameters() or
  /// named_parameters() so far is a tg::Error naming it, since no optimizer built from parameters()
  /// would ever step it, and zero_grad(), to(), state_dict() and checkpoints would skip it. Later
  /// calls cost nothing more.
  Tensor operator()(const Tensor& x);

  /// torch.nn.Module.register_forward_pre_hook / register_forward_hook: hooks run in the order they
  /// were registered, on the calling thread. Copies of a module share its hooks.
  ///@{
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  HookHandle register_forward_hook(ForwardHook hook);
  ///@}

  /// torch.nn.Module.apply: calls `fn` on every descendant, each child's subtree before the child
  /// itself, then on this module (post-order); returns this module. For initialisation:
  ///
  /// @code
  ///   model.apply([](tg::nn::Module& m) {
  ///     if (auto* lin = dynamic_cast<tg::nn::Linear*>(&m)) tg::nn::init::normal_(lin->weight, 0.0, 0.02);
  ///   });
  /// @endcode
  Module& apply(const std::function<void(Module&)>& fn);
  /// torch.nn.Module.named_modules: this module (named "") then every descendant in pre-order by
  /// its dotted path ("layers.0.self_attn"); a module reachable twice is listed once, first path.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The modules of named_modules(), without the names.
  std::vector<Module*> modules();

  /// Declares this module's parameters, buffers and children, in order: m.parameter("weight", weight);
  /// m.buffer("running_mean", running_mean); m.module("lin", lin). Absent (undefined) parameters
  /// and buffers are skipped by every walk.
  virtual void members(Members& m);

  /// Handles sharing the parameters' storage and grad; a tied tensor (Parameter::tie) once.
  std::vector<Tensor> parameters();
  /// "0.weight", "ln.bias", ...: with `remove_duplicate` (PyTorch's default) a tensor held by
  /// several slots (Parameter::tie) is listed once, under its first name; without it, every slot.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool remove_duplicate = true);
  void zero_grad();  ///< every parameter's grad becomes undefined (PyTorch 2's set_to_none)

  /// torch.nn.Module.named_buffers: every buffer (Members::buffer) by its dotted name
  /// ("bn.running_mean"), each module's after its parameters; with `remove_duplicate` a tensor
  /// declared by several slots is listed once, under its first name. Handles sharing the storage.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool remove_duplicate = true);
  /// The tensors of named_buffers(), without the names.
  std::vector<Tensor> buffers();

  /// PyTorch's `module.state_dict()`: every parameter and buffer slot by its dotted name, each
  /// module's parameters, then its buffers, then its children's (a tied tensor appears under each of
  /// its names), as a detached tensor sharing the slot's storage (so it changes as training does:
  /// clone the tensors to keep a snapshot).
  StateDict state_dict();
  /// PyTorch's `module.load_state_dict(state_dict, strict)`: copies each tensor into the parameter
  /// or buffer of its name, so every handle to it (an optimizer's) sees the new values. A float
  /// tensor of the other float dtype is converted, as PyTorch's copy_ does; an integer buffer
  /// (num_batches_tracked) takes an int64 tensor. With `strict` a name the module lacks or a slot
  /// the state dict lacks is an error; without it they are returned. A shape mismatch, an
  /// undefined tensor or a tensor of the wrong kind (int64/bool into a float slot, float into an
  /// integer buffer) is always an error. Errors are tg::Error listing every problem, thrown before
  /// anything changes.
  IncompatibleKeys load_state_dict(const StateDict& state_dict, bool strict = true);
  /// Converts every parameter, its grad and every floating-point buffer to `dtype` (float32 or
  /// float64), keeping each tensor's identity as PyTorch does (`param.data = param.to(dtype)`):
  /// every handle to it, an optimizer built before and its hooks see the new dtype; integer
  /// buffers (BatchNorm's num_batches_tracked) stay int64, as in PyTorch. An optimizer's state
  /// (momentum, Adam's moments) follows at its next step. Views taken before (detach()) keep the
  /// old values.
  Module& to(DType dtype);
  Module& train(bool on = true);  ///< this module and all its descendants
  Module& eval() { return train(false); }  ///< train(false)
  bool is_training() const { return training_; }  ///< set by train() and eval(); true at construction

  /// True when `module` is this module or one of its descendants.
  bool contains(const Module& module);

 protected:
  /// Whether assignment copies parameter values (and so needs both trees to match). Sequential
  /// assignment shares the other's children instead.
  virtual bool assigns_parameter_values() const { return true; }

 private:
  friend class Members;
  friend void detail::give_own_parameters(Module& module);
  // Visits this module, then its members depth-first; `prefix` is this module's dotted path.
  void walk(Members::Visitor& visitor, const std::string& prefix);
  // The check described at operator(): `input` is what forward got, `output` what it returned.
  void check_declared_parameters(const Tensor& x, const Tensor& input, const Tensor& output);
  bool training_ = true;
  detail::SetOnce declarations_checked_;  // operator() has run the check once, on a recorded graph
  std::shared_ptr<detail::ModuleHooks> hooks_;  // null until a hook is registered
};

}  // namespace tg::nn
