// tg::nn::Sequential — modules applied in order; its children are named "0", "1", ...
//
//   tg::nn::Sequential model(tg::nn::Linear(5, 6), tg::nn::ReLU(), tg::nn::LayerNorm({6}));
//   tg::Tensor y = model(x);
//   model.at<tg::nn::Linear>(0).weight;   // "0.weight" in named_parameters()
//
// Children are held by shared_ptr: copying a Sequential shares its children (and so their
// parameters), like copying any module shares its parameters.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/error.hpp"
#include "tapegrad/nn/module.hpp"

namespace tg::nn {

template <class M>
concept ModuleValue = std::derived_from<std::remove_cvref_t<M>, Module>;

class Sequential : public Module {
 public:
  Sequential() = default;
  // Takes each module by value (moved or copied in). One Sequential argument is a copy instead.
  template <ModuleValue... Ms>
    requires(sizeof...(Ms) >= 1 && !(sizeof...(Ms) == 1 && (std::same_as<std::remove_cvref_t<Ms>, Sequential> && ...)))
  explicit Sequential(Ms&&... modules) {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  template <ModuleValue M>
  void push_back(M&& module) {
    push_back(std::shared_ptr<Module>(std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(module))));
  }
  // Shared, not copied. tg::Error for a module that is or contains this Sequential (a cycle that
  // every walk over the tree, and forward, would follow forever).
  void push_back(std::shared_ptr<Module> module);

  size_t size() const { return children_.size(); }
  Module& operator[](size_t index);  // tg::Error when out of range
  // The child at `index` as an M; tg::Error when out of range or of another type.
  template <class M>
  M& at(size_t index) {
    M* child = dynamic_cast<M*>(&(*this)[index]);
    check(child != nullptr, "Sequential::at", "child ", index, " is not of the requested module type");
    return *child;
  }

  Tensor forward(const Tensor& x) override;  // children in order; the identity when empty
  void members(Members& m) override;

 protected:
  // `a = b` makes a share b's children (as copying does), whatever their parameters.
  bool assigns_parameter_values() const override { return false; }

 private:
  std::vector<std::shared_ptr<Module>> children_;
};

}  // namespace tg::nn
