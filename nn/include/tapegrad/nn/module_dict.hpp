/// @file
/// tg::nn::ModuleDict — child modules by name, in insertion order (torch.nn.ModuleDict), whose
/// parameters are the model's parameters under "<name>.": a model that picks its children by key.
///
/// @code
///   tg::nn::ModuleDict heads;
///   heads.insert("class", tg::nn::Linear(16, 10));
///   heads.insert("box", tg::nn::Linear(16, 4));
///   tg::Tensor logits = heads["class"](features);        // "class.weight" in named_parameters()
///   for (const std::string& name : heads.keys()) ...
/// @endcode
///
/// Children are held by shared_ptr: copying a dict shares its children, like copying any module
/// shares its parameters. It has no forward of its own.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/nn/module_list.hpp"

namespace tg::nn {

/// Child modules by name, in insertion order (nn.ModuleDict); no forward of its own.
class ModuleDict : public Module {
 public:
  ModuleDict() = default;

  /// Adds `module` under `name`, or replaces the child already there, keeping its position (as
  /// `dict[name] = module`). Names follow the member rule: non-empty, no '.', not "__metadata__".
  /// tg::Error for a null module or one that is or contains this dict.
  void insert(const std::string& name, std::shared_ptr<Module> module);
  /// Adds or replaces `name` with `module`, moved or copied in.
  template <ModuleValue M>
  void insert(const std::string& name, M&& module) {
    insert(name, std::shared_ptr<Module>(std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(module))));
  }
  /// Removes and returns the child `name`; tg::Error when there is none.
  std::shared_ptr<Module> pop(const std::string& name);
  void clear() { children_.clear(); }  ///< removes every child

  size_t size() const { return children_.size(); }  ///< the number of children
  bool empty() const { return children_.empty(); }  ///< no children
  bool contains(const std::string& name) const;     ///< a child named `name` exists
  Module& operator[](const std::string& name);  ///< tg::Error naming the key when absent
  /// The child `name` as an M; tg::Error when absent or of another type.
  template <class M>
  M& at(const std::string& name) {
    M* child = dynamic_cast<M*>(&(*this)[name]);
    check(child != nullptr, "ModuleDict", "child '", name, "' is not of the requested module type");
    return *child;
  }
  std::vector<std::string> keys() const;  ///< in insertion order
  /// (name, child) in insertion order; the children are shared.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items() const { return children_; }

  /// A ModuleDict has no forward (as in PyTorch): tg::Error.
  Tensor forward(const Tensor& x) override;
  void members(Members& m) override;

 protected:
  /// `a = b` makes a share b's children (as copying does), whatever their parameters.
  bool assigns_parameter_values() const override { return false; }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace tg::nn
