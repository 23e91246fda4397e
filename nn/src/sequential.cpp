// Sequential: children applied in order, named by their position.
#include "tapegrad/nn/sequential.hpp"

#include <string>

namespace tg::nn {

void Sequential::push_back(std::shared_ptr<Module> module) {
  check(module != nullptr, "Sequential::push_back", "null module");
  check(!module->contains(*this), "Sequential::push_back", "a Sequential cannot contain itself");
  children_.push_back(std::move(module));
}

Module& Sequential::operator[](size_t index) {
  check(index < children_.size(), "Sequential", "index ", index, " is out of range for ", children_.size(),
        " modules");
  return *children_[index];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& child : children_) h = (*child)(h);
  return h;
}

void Sequential::members(Members& m) {
  for (size_t i = 0; i < children_.size(); ++i) m.module(std::to_string(i), *children_[i]);
}

}  // namespace tg::nn
