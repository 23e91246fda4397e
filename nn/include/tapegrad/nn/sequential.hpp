/// @file
/// tg::nn::Sequential — modules applied in order; its children are named "0", "1", ...
///
/// @code
///   tg::nn::Sequential model(tg::nn::Linear(5, 6), tg::nn::ReLU(), tg::nn::LayerNorm({6}));
///   tg::Tensor y = model(x);
///   model.at<tg::nn::Linear>(0).weight;   // "0.weight" in named_parameters()
/// @endcode
///
/// A ModuleList (module_list.hpp: push_back, insert, extend, [], at<M>, iteration) with a forward.
/// Children are held by shared_ptr: copying a Sequential shares its children (and so their
/// parameters), like copying any module shares its parameters.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include "tapegrad/nn/module_list.hpp"

namespace tg::nn {

/// Modules applied in order, each to the previous one's output (nn.Sequential).
class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential") {}
  /// Takes each module by value (moved or copied in). One Sequential argument is a copy instead.
  template <ModuleValue... Ms>
    requires(sizeof...(Ms) >= 1 && !(sizeof...(Ms) == 1 && (std::same_as<std::remove_cvref_t<Ms>, Sequential> && ...)))
  explicit Sequential(Ms&&... modules) : Sequential() {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  Tensor forward(const Tensor& x) override;  ///< children in order; the identity when empty
};

}  // namespace tg::nn
