// ModuleList: children named by their position, shared rather than copied.
#include "tapegrad/nn/module_list.hpp"

#include <string>

namespace tg::nn {

void ModuleList::add(size_t index, std::shared_ptr<Module> module, const char* method) {
  const std::string op = std::string(kind_) + "::" + method;  // "Sequential::push_back"
  check(module != nullptr, op.c_str(), "cannot hold a null module");
  check(index <= children_.size(), op.c_str(), "insert position ", index, " is out of range for ",
        children_.size(), " modules");
  check(!module->contains(*this), op.c_str(), "a ", kind_, " cannot contain itself");
  children_.insert(children_.begin() + static_cast<std::ptrdiff_t>(index), std::move(module));
}

void ModuleList::insert(size_t index, std::shared_ptr<Module> module) { add(index, std::move(module), "insert"); }

void ModuleList::push_back(std::shared_ptr<Module> module) { add(children_.size(), std::move(module), "push_back"); }

void ModuleList::extend(const ModuleList& other) {
  // Copied first: `list.extend(list)` must not walk the vector it appends to.
  const std::vector<std::shared_ptr<Module>> others = other.children_;
  for (const auto& child : others) push_back(child);
}

Module& ModuleList::operator[](size_t index) { return *ptr(index); }

std::shared_ptr<Module> ModuleList::ptr(size_t index) {
  check(index < children_.size(), kind_, "index ", index, " is out of range for ", children_.size(), " modules");
  return children_[index];
}

Tensor ModuleList::forward(const Tensor&) {
  throw Error(tg::detail::concat(kind_, ": a ModuleList has no forward; call its children from the module that holds it"));
}

void ModuleList::members(Members& m) {
  for (size_t i = 0; i < children_.size(); ++i) m.module(std::to_string(i), *children_[i]);
}

}  // namespace tg::nn
