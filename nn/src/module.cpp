// Module and Parameter: the recursive walks over declared members, and value-assignment into
// parameters.
#include "tapegrad/nn/module.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "autograd/node.hpp"
#include "member_name.hpp"
#include "out_of_memory.hpp"
#include "tensor_impl.hpp"
#include "tapegrad/autograd.hpp"

namespace tg::nn {

// --- The parameters made so far ---------------------------------------------------------------------

namespace {

// Every tensor made as a parameter, with its label and whether a module's named_parameters() has
// listed it, for operator()'s check. A parameter nobody lists is one no optimizer built from
// parameters() steps: most likely a child left out of its parent's members(). Entries hold their
// tensor weakly (an address may be reused once the tensor dies) and the dead ones are dropped as
// the registry grows.
class ParameterRegistry {
 public:
  void add(const Tensor& parameter, const std::string& label) {
    const std::lock_guard lock(mutex_);
    if (entries_.size() >= prune_at_) {
      std::erase_if(entries_, [](const auto& entry) { return entry.second.tensor.expired(); });
      prune_at_ = std::max<size_t>(1024, 2 * entries_.size());
    }
    entries_[tg::detail::impl_of(parameter)] = {tg::detail::impl_ptr_of(parameter), label, false};
  }
  void mark_listed(const Tensor& parameter) {
    const std::lock_guard lock(mutex_);
    if (Entry* entry = find(tg::detail::impl_of(parameter))) entry->listed = true;
  }
  // The label of a parameter no module has listed, or nullopt (listed, or not a parameter).
  std::optional<std::string> unlisted(const TensorImpl* tensor) {
    const std::lock_guard lock(mutex_);
    const Entry* entry = find(tensor);
    if (entry == nullptr || entry->listed) return std::nullopt;
    return entry->label;
  }

 private:
  struct Entry {
    std::weak_ptr<TensorImpl> tensor;
    std::string label;  // "Linear.weight"
    bool listed = false;
  };
  Entry* find(const TensorImpl* tensor) {
    const auto it = entries_.find(tensor);
    return it != entries_.end() && it->second.tensor.lock().get() == tensor ? &it->second : nullptr;
  }
  std::mutex mutex_;
  std::unordered_map<const TensorImpl*, Entry> entries_;
  size_t prune_at_ = 1024;
};

ParameterRegistry& parameter_registry() {
  static ParameterRegistry* registry = new ParameterRegistry;  // never destroyed: parameters may outlive main
  return *registry;
}

}  // namespace

// --- Parameter -------------------------------------------------------------------------------------

Parameter::Parameter(std::string name, const Tensor& value) : label_(std::move(name)) {
  // detach(): the slot is always a leaf of its own, whatever produced `value`.
  if (value.defined()) {
    Tensor::operator=(value.detach().requires_grad_());
    parameter_registry().add(*this, label_);
  }
}

Parameter& Parameter::operator=(const Tensor& values) {
  const char* what = label_.empty() ? "Parameter" : label_.c_str();
  check(defined(), what, "cannot assign to an absent parameter (the module was built without it)");
  check(values.defined(), what, "cannot assign an undefined tensor to a parameter of shape ", shape());
  check(values.shape() == shape() && values.dtype() == dtype(), what, "cannot assign a ", values.dtype(),
        " tensor of shape ", values.shape(), " to a ", dtype(), " parameter of shape ", shape());
  NoGradGuard no_grad;  // an in-place update of a leaf, like torch's `with no_grad(): p.copy_(t)`
  copy_(values);
  return *this;
}

void Parameter::tie(const Parameter& other) {
  const char* what = "Parameter.tie";
  const std::string mine = label_.empty() ? "the parameter" : "'" + label_ + "'";
  const std::string theirs = other.label_.empty() ? "the parameter" : "'" + other.label_ + "'";
  check(defined() && other.defined(), what, "cannot tie ", mine, " (", defined() ? "present" : "absent", ") to ",
        theirs, " (", other.defined() ? "present" : "absent", "): both must be present");
  check(shape() == other.shape() && dtype() == other.dtype(), what, "cannot tie ", mine, " (", dtype(), " ", shape(),
        ") to ", theirs, " (", other.dtype(), " ", other.shape(), "): shapes and dtypes must agree");
  // Rebinding the handle (Tensor's assignment, not Parameter's value copy) makes both slots one tensor.
  Tensor::operator=(static_cast<const Tensor&>(other));
}

// --- Members: one visitor behind every walk ----------------------------------------------------------

struct Members::Visitor {
  std::function<void(const std::string& dotted_name, Parameter&)> on_parameter = nullptr;
  // Defined buffers only (an absent buffer is not part of the module's state).
  std::function<void(const std::string& dotted_name, Tensor&)> on_buffer = nullptr;
  std::function<void(Module&)> on_module = nullptr;
  // Pre-order with the module's dotted path ("" for the root), and post-order (after its members).
  std::function<void(const std::string& path, Module&)> on_named_module = nullptr;
  std::function<void(Module&)> after_module = nullptr;
  bool include_absent = false;  // also visit absent (undefined) parameters
};

// A member name is one segment of a dotted name: a dot would make "lin.bias" beside a child "lin"
// ambiguous, and "__metadata__" is the safetensors header's own key.
void detail::check_member_name(const std::string& name, const char* what) {
  check(!name.empty() && name.find('.') == std::string::npos && name != "__metadata__", what, "invalid name '", name,
        "': a member name must be non-empty, contain no '.', and not be '__metadata__'");
}

void Members::parameter(const std::string& name, Parameter& parameter) {
  detail::check_member_name(name, "Members::parameter");
  if (visitor_.on_parameter && (parameter.defined() || visitor_.include_absent))
    visitor_.on_parameter(prefix_ + name, parameter);
}

void Members::buffer(const std::string& name, Tensor& buffer) {
  detail::check_member_name(name, "Members::buffer");
  if (visitor_.on_buffer && buffer.defined()) pending_buffers_.emplace_back(prefix_ + name, &buffer);
}

void Members::flush_buffers() {
  for (auto& [name, buffer] : pending_buffers_) visitor_.on_buffer(name, *buffer);
  pending_buffers_.clear();
}

void Members::module(const std::string& name, Module& child) {
  detail::check_member_name(name, "Members::module");
  flush_buffers();  // PyTorch's order: a module's own state before its children's
  child.walk(visitor_, prefix_ + name + ".");
}

// --- Module ----------------------------------------------------------------------------------------

void Module::members(Members&) {}

namespace detail {
struct ModuleHooks {
  std::shared_ptr<autograd::HookList<ForwardPreHook>> forward_pre;
  std::shared_ptr<autograd::HookList<ForwardHook>> forward;
};
}  // namespace detail

namespace {
// The module calls running on this thread: the outermost one, and its parameters once a check
// inside it has asked for them (a child may use parameters its caller declares: a tied weight).
struct ModuleCalls {
  Module* outermost = nullptr;
  int depth = 0;
  std::optional<std::unordered_set<const TensorImpl*>> outermost_parameters;
};
thread_local ModuleCalls module_calls;

struct ModuleCallScope {
  explicit ModuleCallScope(Module& module) {
    if (module_calls.depth++ == 0) module_calls.outermost = &module;
  }
  ~ModuleCallScope() {
    if (--module_calls.depth == 0) module_calls = {};
  }
  ModuleCallScope(const ModuleCallScope&) = delete;
  ModuleCallScope& operator=(const ModuleCallScope&) = delete;
};
}  // namespace

Tensor Module::operator()(const Tensor& x) try {
  const ModuleCallScope scope(*this);
  if (!hooks_) {
    Tensor output = forward(x);
    if (!declarations_checked_.is_set()) check_declared_parameters(x, x, output);
    return output;
  }
  // Copies of the lists: a hook may register or remove hooks.
  const std::shared_ptr<detail::ModuleHooks> hooks = hooks_;
  Tensor input = x;
  if (hooks->forward_pre)
    for (const auto& [id, hook] : std::vector(hooks->forward_pre->hooks))
      if (Tensor replaced = hook(*this, input); replaced.defined()) input = std::move(replaced);
  Tensor output = forward(input);
  if (!declarations_checked_.is_set()) check_declared_parameters(x, input, output);
  if (hooks->forward)
    for (const auto& [id, hook] : std::vector(hooks->forward->hooks))
      if (Tensor replaced = hook(*this, input, output); replaced.defined()) output = std::move(replaced);
  return output;
} catch (const std::bad_alloc&) {
  // The ops inside forward name themselves (their tg::Error passes); this is the copies of the
  // hook lists, or a custom forward's own allocations.
  throw tg::detail::OutOfMemoryError("forward", "out of memory");
}

namespace {
// The class of `module` as written in C++ ("Block", "tg::nn::Linear"), for messages.
std::string module_type_name(const Module& module) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(module).name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : typeid(module).name();
  std::free(demangled);
  return name;
}
}  // namespace

void Module::check_declared_parameters(const Tensor& x, const Tensor& input, const Tensor& output) {
  // Without a graph (no grad mode, nothing requires grad) the parameters forward used cannot be
  // seen; the first call that records one does the check.
  if (!output.defined() || !output.requires_grad()) return;
  const auto parameters_of = [](Module& module) {
    std::unordered_set<const TensorImpl*> parameters;
    Members::Visitor visitor{.on_parameter = [&](const std::string&, Parameter& p) {
      parameters.insert(tg::detail::impl_of(p));
    }};
    module.walk(visitor, "");
    return parameters;
  };
  // Declared: by this module, or by the outermost module being called (which holds this one).
  const std::unordered_set<const TensorImpl*> own = parameters_of(*this);
  std::optional<std::unordered_set<const TensorImpl*>>& outer = module_calls.outermost_parameters;
  if (!outer && module_calls.outermost != this) outer = parameters_of(*module_calls.outermost);
  const auto declared = [&](const TensorImpl* leaf) { return own.contains(leaf) || (outer && outer->contains(leaf)); };
  // The leaves the output reaches without going through forward's input: x and what made it
  // belong to the caller (the previous layer, whose own call checks them).
  const TensorImpl* inputs[] = {tg::detail::impl_of(x), tg::detail::impl_of(input)};
  std::unordered_set<const autograd::Node*> seen;
  for (const TensorImpl* in : inputs)
    if (in != nullptr && in->grad_fn) seen.insert(in->grad_fn.get());
  std::vector<const TensorImpl*> leaves;
  std::vector<const autograd::Node*> stack;
  const TensorImpl* out = tg::detail::impl_of(output);
  if (!out->grad_fn) leaves.push_back(out);  // forward returned a leaf (a parameter itself, or x)
  else if (seen.insert(out->grad_fn.get()).second) stack.push_back(out->grad_fn.get());  // else: x itself
  while (!stack.empty()) {
    const autograd::Node* node = stack.back();
    stack.pop_back();
    for (const autograd::Edge& edge : node->next) {
      if (!edge || !seen.insert(edge.function.get()).second) continue;
      if (!edge.function->is_accumulator) {
        stack.push_back(edge.function.get());
      } else if (const auto leaf = static_cast<const autograd::AccumulateGrad&>(*edge.function).leaf.lock()) {
        leaves.push_back(leaf.get());
      }
    }
  }
  for (const TensorImpl* leaf : leaves) {
    if (leaf == inputs[0] || leaf == inputs[1] || declared(leaf)) continue;
    const std::optional<std::string> label = parameter_registry().unlisted(leaf);
    if (!label) continue;
    const std::string type = module_type_name(*this);
    throw Error(tg::detail::concat(
        type, ".forward: the output depends on the parameter '", label->empty() ? "Parameter" : *label, "' (",
        leaf->dtype, " ", leaf->shape, "), which ", type,
        " does not declare and no module's parameters() has listed: an optimizer built from parameters() "
        "would never step it, and zero_grad(), to(), state_dict() and checkpoints would skip it. Declare the "
        "child module holding it in members() (m.module(\"name\", child)), or the parameter itself "
        "(m.parameter(\"name\", p))"));
  }
  declarations_checked_.set();
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  check(static_cast<bool>(hook), "register_forward_pre_hook", "empty hook function");
  if (!hooks_) hooks_ = std::make_shared<detail::ModuleHooks>();
  return autograd::add_hook(hooks_->forward_pre, std::move(hook));
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  check(static_cast<bool>(hook), "register_forward_hook", "empty hook function");
  if (!hooks_) hooks_ = std::make_shared<detail::ModuleHooks>();
  return autograd::add_hook(hooks_->forward, std::move(hook));
}

namespace {
// Every parameter slot of the tree, absent ones included, as "name: dtype [shape]" or "name: absent",
// and every buffer as "name: dtype [shape] buffer".
std::vector<std::string> describe_slots(const std::function<void(Members::Visitor&)>& walk) {
  std::vector<std::string> slots;
  Members::Visitor visitor{.on_parameter =
                               [&](const std::string& name, Parameter& p) {
                                 slots.push_back(p.defined() ? tg::detail::concat(name, ": ", p.dtype(), " ", p.shape())
                                                             : name + ": absent");
                               },
                           .on_buffer =
                               [&](const std::string& name, Tensor& b) {
                                 slots.push_back(tg::detail::concat(name, ": ", b.dtype(), " ", b.shape(), " buffer"));
                               },
                           .include_absent = true};
  walk(visitor);
  return slots;
}
}  // namespace

Module& Module::operator=(const Module& other) {
  if (this == &other) return *this;
  if (assigns_parameter_values()) {
    // The derived class's assignment copies the parameters after this returns: check them all first.
    auto& source = const_cast<Module&>(other);  // walked, not changed
    const std::vector<std::string> mine = describe_slots([this](Members::Visitor& v) { walk(v, ""); });
    const std::vector<std::string> theirs = describe_slots([&source](Members::Visitor& v) { source.walk(v, ""); });
    if (mine != theirs) {
      std::string differences;
      for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
        const std::string here = i < mine.size() ? mine[i] : "(none)", there = i < theirs.size() ? theirs[i] : "(none)";
        if (here != there) differences += tg::detail::concat(differences.empty() ? "" : "; ", "this ", here, " vs ", there);
      }
      throw Error("Module assignment: the modules declare different parameters or buffers (" + differences +
                  "); nothing was assigned");
    }
  }
  training_ = other.training_;
  return *this;
}

bool Module::contains(const Module& module) {
  bool found = false;
  Members::Visitor visitor{.on_module = [&](Module& visited) { found |= &visited == &module; }};
  walk(visitor, "");
  return found;
}

void Module::walk(Members::Visitor& visitor, const std::string& prefix) {
  if (visitor.on_module) visitor.on_module(*this);
  // prefix is "a.b." below the root: the module's own path drops the trailing dot.
  if (visitor.on_named_module) visitor.on_named_module(prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), *this);
  Members declared(visitor, prefix);
  members(declared);
  declared.flush_buffers();
  if (visitor.after_module) visitor.after_module(*this);
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  check(static_cast<bool>(fn), "Module.apply", "empty function");
  // Post-order, as torch's `for child in children(): child.apply(fn)` followed by `fn(self)`. The
  // modules are gathered first, so `fn` may change the tree's parameters without disturbing the walk.
  std::vector<Module*> order;
  Members::Visitor visitor{.after_module = [&](Module& module) { order.push_back(&module); }};
  walk(visitor, "");
  for (Module* module : order) fn(*module);
  return *this;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> named;
  std::unordered_set<const Module*> seen;
  Members::Visitor visitor{.on_named_module = [&](const std::string& path, Module& module) {
    if (seen.insert(&module).second) named.emplace_back(path, &module);
  }};
  walk(visitor, "");
  return named;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> all;
  for (const auto& [name, module] : named_modules()) all.push_back(module);
  return all;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool remove_duplicate) {
  std::vector<std::pair<std::string, Tensor>> named;
  std::unordered_set<const void*> seen;  // the tensors listed so far, by identity (tied slots share one)
  Members::Visitor visitor{.on_parameter = [&](const std::string& name, Parameter& p) {
    if (!remove_duplicate || seen.insert(tg::detail::impl_of(p)).second) named.emplace_back(name, p);
  }};
  walk(visitor, "");
  // Listed: whoever asked (an optimizer's constructor, clip_grad_norm_) looks after these.
  for (const auto& [name, p] : named) parameter_registry().mark_listed(p);
  return named;
}

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> handles;
  for (auto& [name, p] : named_parameters()) handles.push_back(std::move(p));
  return handles;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool remove_duplicate) {
  std::vector<std::pair<std::string, Tensor>> named;
  std::unordered_set<const void*> seen;  // by identity, as named_parameters
  Members::Visitor visitor{.on_buffer = [&](const std::string& name, Tensor& b) {
    if (!remove_duplicate || seen.insert(tg::detail::impl_of(b)).second) named.emplace_back(name, b);
  }};
  walk(visitor, "");
  return named;
}

std::vector<Tensor> Module::buffers() {
  std::vector<Tensor> handles;
  for (auto& [name, b] : named_buffers()) handles.push_back(std::move(b));
  return handles;
}

void detail::give_own_parameters(Module& module) {
  NoGradGuard no_grad;  // copies of leaves, not operations to differentiate
  std::vector<std::pair<Tensor, Tensor>> copies;  // (shared tensor, its fresh copy): tied slots stay tied
  const auto fresh_copy = [&](const Tensor& shared, bool leaf) {
    for (const auto& [original, copy] : copies)
      if (original.is_same(shared)) return copy;
    Tensor fresh = leaf ? shared.detach().clone().requires_grad_() : shared.detach().clone();
    copies.emplace_back(shared, fresh);
    return fresh;
  };
  Members::Visitor visitor{
      .on_parameter =
          [&](const std::string&, Parameter& p) {
            static_cast<Tensor&>(p) = fresh_copy(p, true);  // rebinds the slot, unlike Parameter's value assignment
            parameter_registry().add(p, p.label());
          },
      .on_buffer = [&](const std::string&, Tensor& b) { b = fresh_copy(b, false); }};
  module.walk(visitor, "");
}

void Module::zero_grad() {
  Members::Visitor visitor{.on_parameter = [](const std::string&, Parameter& p) { p.set_grad(Tensor()); }};
  walk(visitor, "");
}

Module& Module::to(DType dtype) try {
  // Parameters require grad, which only float tensors can: refuse before converting any of them.
  check(is_floating_point(dtype), "Module.to", "parameters must be float32, float64 or bfloat16, got ", dtype);
  // Every conversion first, then the swaps: running out of memory half-way leaves the module as it was.
  struct Conversion {
    Tensor param;  // the parameter's own handle: its identity is what the optimizer holds
    Tensor values;
    Tensor grad;
  };
  std::vector<Conversion> conversions;
  const auto convert = [&](const Tensor& p) {
    if (p.dtype() == dtype) return;
    // A tensor declared twice (tied weights) is converted once and stays one tensor.
    for (const Conversion& c : conversions)
      if (c.param.is_same(p)) return;
    NoGradGuard no_grad;  // a conversion of leaves, not an operation to differentiate
    const Tensor grad = p.grad();
    conversions.push_back({p, p.detach().to(dtype), grad.defined() ? grad.detach().to(dtype) : Tensor()});
  };
  Members::Visitor visitor{.on_parameter = [&](const std::string&, Parameter& p) { convert(p); },
                           // Integer buffers (counters) stay integers, as PyTorch's module.to(dtype).
                           .on_buffer =
                               [&](const std::string&, Tensor& b) {
                                 if (is_floating_point(b.dtype())) convert(b);
                               }};
  walk(visitor, "");
  // As PyTorch's `param.data = param.to(dtype)`: the same parameter objects (which optimizers, hooks
  // and every handle refer to) now hold the converted values, and their grads are converted too.
  for (Conversion& c : conversions) {
    c.param.set_grad(Tensor());
    tg::detail::set_data(c.param, c.values);
    if (c.grad.defined()) c.param.set_grad(c.grad);
  }
  return *this;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("Module.to");
}

// --- state_dict ------------------------------------------------------------------------------------

const StateDict::Entry* StateDict::find(const std::string& name) const {
  for (const Entry& entry : entries_)
    if (entry.first == name) return &entry;
  return nullptr;
}

void StateDict::insert(const std::string& name, Tensor tensor) {
  if (const Entry* entry = find(name))
    const_cast<Entry*>(entry)->second = std::move(tensor);
  else
    entries_.emplace_back(name, std::move(tensor));
}

bool StateDict::contains(const std::string& name) const { return find(name) != nullptr; }

const Tensor& StateDict::at(const std::string& name) const {
  const Entry* entry = find(name);
  if (entry == nullptr) {
    std::string known;
    for (const Entry& e : entries_) known += (known.empty() ? "'" : ", '") + e.first + "'";
    throw Error("StateDict.at: no key '" + name + "'; the keys are " + (known.empty() ? "none" : known));
  }
  return entry->second;
}

Tensor& StateDict::at(const std::string& name) { return const_cast<Tensor&>(std::as_const(*this).at(name)); }

bool StateDict::erase(const std::string& name) {
  const Entry* entry = find(name);
  if (entry == nullptr) return false;
  entries_.erase(entries_.begin() + (entry - entries_.data()));
  return true;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> names;
  for (const Entry& entry : entries_) names.push_back(entry.first);
  return names;
}

StateDict Module::state_dict() try {
  StateDict result;
  Members::Visitor visitor{
      .on_parameter = [&](const std::string& name, Parameter& p) { result.insert(name, p.detach()); },
      .on_buffer = [&](const std::string& name, Tensor& b) { result.insert(name, b.detach()); }};
  walk(visitor, "");
  return result;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("state_dict");
}

IncompatibleKeys Module::load_state_dict(const StateDict& state_dict, bool strict) try {
  const char* op = "load_state_dict";
  struct Slot {
    std::string name;
    Parameter* parameter;  // null for a buffer
    Tensor* buffer;        // null for a parameter
    const Tensor& tensor() const { return parameter ? static_cast<const Tensor&>(*parameter) : *buffer; }
  };
  std::vector<Slot> slots;
  Members::Visitor visitor{
      .on_parameter = [&](const std::string& name, Parameter& p) { slots.push_back({name, &p, nullptr}); },
      .on_buffer = [&](const std::string& name, Tensor& b) { slots.push_back({name, nullptr, &b}); }};
  walk(visitor, "");

  // Every problem first, PyTorch's way (missing, unexpected, then per-key errors), all in one message.
  IncompatibleKeys incompatible;
  std::vector<std::string> errors;
  std::vector<Tensor> values(slots.size());  // converted to each slot's dtype before any copy
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& slot = slots[i];
    const std::string& name = slot.name;
    const Tensor& target = slot.tensor();
    const char* kind = slot.parameter ? "parameter" : "buffer";
    if (!state_dict.contains(name)) {
      incompatible.missing_keys.push_back(name);
      continue;
    }
    const Tensor& value = state_dict.at(name);
    // A float slot takes either float dtype (converted); an integer buffer (a counter) takes int64.
    const bool kind_matches = value.defined() && (is_floating_point(target.dtype())
                                                      ? is_floating_point(value.dtype())
                                                      : value.dtype() == target.dtype());
    if (!value.defined()) {
      errors.push_back(tg::detail::concat("'", name, "' is an undefined tensor"));
    } else if (!kind_matches) {
      errors.push_back(tg::detail::concat("'", name, "' is ", value.dtype(), "; the ", kind, " is ", target.dtype()));
    } else if (value.shape() != target.shape()) {
      errors.push_back(tg::detail::concat("size mismatch for '", name, "': copying a tensor of shape ", value.shape(),
                                          ", the ", kind, " has shape ", target.shape()));
    } else {
      NoGradGuard no_grad;
      values[i] = value.detach().to(target.dtype());
    }
  }
  for (const StateDict::Entry& entry : state_dict) {
    const bool known = std::any_of(slots.begin(), slots.end(), [&](const Slot& slot) { return slot.name == entry.first; });
    if (!known) incompatible.unexpected_keys.push_back(entry.first);
  }
  const auto quoted = [](const std::vector<std::string>& names) {
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "'" : ", '") + name + "'";
    return list;
  };
  std::string message;
  if (strict && !incompatible.missing_keys.empty())
    message += "missing key(s) in state_dict: " + quoted(incompatible.missing_keys) + "; ";
  if (strict && !incompatible.unexpected_keys.empty())
    message += "unexpected key(s) in state_dict: " + quoted(incompatible.unexpected_keys) + "; ";
  for (const std::string& error : errors) message += error + "; ";
  if (!message.empty())
    throw Error(std::string(op) + ": " + message + "nothing was loaded" +
                (strict && (!incompatible.missing_keys.empty() || !incompatible.unexpected_keys.empty())
                     ? " (load_state_dict(state_dict, false) loads the keys that match and returns the others)"
                     : ""));

  NoGradGuard no_grad;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!values[i].defined()) continue;
    if (slots[i].parameter) *slots[i].parameter = values[i];  // Parameter's assignment: a copy into its storage
    else slots[i].buffer->copy_(values[i]);                    // into the buffer's storage: every handle sees it
  }
  return incompatible;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("load_state_dict");
}

Module& Module::train(bool on) {
  Members::Visitor visitor{.on_module = [on](Module& module) { module.training_ = on; }};
  walk(visitor, "");
  return *this;
}

}  // namespace tg::nn
