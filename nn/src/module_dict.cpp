// ModuleDict: children by name in insertion order, shared rather than copied.
#include "tapegrad/nn/module_dict.hpp"

#include <algorithm>

#include "member_name.hpp"

namespace tg::nn {

namespace {
template <typename Children>
auto find_child(Children& children, const std::string& name) {
  return std::find_if(children.begin(), children.end(), [&](const auto& entry) { return entry.first == name; });
}
}  // namespace

void ModuleDict::insert(const std::string& name, std::shared_ptr<Module> module) {
  detail::check_member_name(name, "ModuleDict");
  check(module != nullptr, "ModuleDict", "cannot hold a null module (key '", name, "')");
  check(!module->contains(*this), "ModuleDict", "a ModuleDict cannot contain itself (key '", name, "')");
  const auto it = find_child(children_, name);
  if (it != children_.end())
    it->second = std::move(module);
  else
    children_.emplace_back(name, std::move(module));
}

std::shared_ptr<Module> ModuleDict::pop(const std::string& name) {
  const auto it = find_child(children_, name);
  check(it != children_.end(), "ModuleDict::pop", "no child named '", name, "'");
  std::shared_ptr<Module> child = std::move(it->second);
  children_.erase(it);
  return child;
}

bool ModuleDict::contains(const std::string& name) const { return find_child(children_, name) != children_.end(); }

Module& ModuleDict::operator[](const std::string& name) {
  const auto it = find_child(children_, name);
  check(it != children_.end(), "ModuleDict", "no child named '", name, "'");
  return *it->second;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> names;
  names.reserve(children_.size());
  for (const auto& entry : children_) names.push_back(entry.first);
  return names;
}

Tensor ModuleDict::forward(const Tensor&) {
  throw Error("ModuleDict: a ModuleDict has no forward; call its children from the module that holds it");
}

void ModuleDict::members(Members& m) {
  for (const auto& [name, child] : children_) m.module(name, *child);
}

}  // namespace tg::nn
