// Module and Parameter: the recursive walks over declared members, and value-assignment into
// parameters.
#include "tapegrad/nn/module.hpp"

#include <functional>

#include "tapegrad/autograd.hpp"

namespace tg::nn {

// --- Parameter -------------------------------------------------------------------------------------

Parameter::Parameter(std::string name, const Tensor& value) : label_(std::move(name)) {
  // detach(): the slot is always a leaf of its own, whatever produced `value`.
  if (value.defined()) Tensor::operator=(value.detach().requires_grad_());
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

void Parameter::replace(const Tensor& value) { Tensor::operator=(value); }

// --- Members: one visitor behind every walk ----------------------------------------------------------

struct Members::Visitor {
  std::function<void(const std::string& dotted_name, Parameter&)> on_parameter = nullptr;
  std::function<void(Module&)> on_module = nullptr;
};

namespace {
// A member name is one segment of a dotted name: a dot would make "lin.bias" beside a child "lin"
// ambiguous, and "__metadata__" is the safetensors header's own key.
void check_member_name(const std::string& name, const char* what) {
  check(!name.empty() && name.find('.') == std::string::npos && name != "__metadata__", what, "invalid name '", name,
        "': a member name must be non-empty, contain no '.', and not be '__metadata__'");
}
}  // namespace

void Members::parameter(const std::string& name, Parameter& parameter) {
  check_member_name(name, "Members::parameter");
  if (visitor_.on_parameter && parameter.defined()) visitor_.on_parameter(prefix_ + name, parameter);
}

void Members::module(const std::string& name, Module& child) {
  check_member_name(name, "Members::module");
  child.walk(visitor_, prefix_ + name + ".");
}

// --- Module ----------------------------------------------------------------------------------------

void Module::members(Members&) {}

void Module::walk(Members::Visitor& visitor, const std::string& prefix) {
  if (visitor.on_module) visitor.on_module(*this);
  Members declared(visitor, prefix);
  members(declared);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor>> named;
  Members::Visitor visitor{.on_parameter = [&](const std::string& name, Parameter& p) { named.emplace_back(name, p); }};
  walk(visitor, "");
  return named;
}

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> handles;
  Members::Visitor visitor{.on_parameter = [&](const std::string&, Parameter& p) { handles.push_back(p); }};
  walk(visitor, "");
  return handles;
}

void Module::zero_grad() {
  Members::Visitor visitor{.on_parameter = [](const std::string&, Parameter& p) { p.set_grad(Tensor()); }};
  walk(visitor, "");
}

Module& Module::to(DType dtype) {
  Members::Visitor visitor{.on_parameter = [dtype](const std::string&, Parameter& p) {
    if (p.dtype() == dtype) return;
    NoGradGuard no_grad;  // a conversion of leaves, not an operation to differentiate
    const Tensor grad = p.grad();
    Tensor converted = p.to(dtype);
    converted.requires_grad_(p.requires_grad());
    if (grad.defined()) converted.set_grad(grad.to(dtype));
    p.replace(converted);
  }};
  walk(visitor, "");
  return *this;
}

Module& Module::train(bool on) {
  Members::Visitor visitor{.on_module = [on](Module& module) { module.training_ = on; }};
  walk(visitor, "");
  return *this;
}

}  // namespace tg::nn
