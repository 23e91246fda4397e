/// @file
/// tg::nn::ModuleList — an indexed list of child modules named "0", "1", ... (torch.nn.ModuleList),
/// whose parameters are the model's parameters. It has no forward of its own: a module that holds
/// one decides how its children are called.
///
/// @code
///   struct Tower : tg::nn::Module {
///     tg::nn::ModuleList blocks;
///     Tower() { for (int i = 0; i < 3; ++i) blocks.push_back(tg::nn::Linear(8, 8)); }
///     void members(tg::nn::Members& m) override { m.module("blocks", blocks); }  // "blocks.0.weight"
///     tg::Tensor forward(const tg::Tensor& x) override {
///       tg::Tensor h = x;
///       for (tg::nn::Module& block : blocks) h = block(h).relu();
///       return h;
///     }
///   };
/// @endcode
///
/// Children are held by shared_ptr: copying a list shares its children (and so their parameters),
/// like copying any module shares its parameters. tg::nn::Sequential is a ModuleList whose forward
/// calls the children in order.
#pragma once

#include <concepts>
#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/error.hpp"
#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// A module type taken by value (moved or copied in) by the containers.
template <class M>
concept ModuleValue = std::derived_from<std::remove_cvref_t<M>, Module>;

/// An indexed list of child modules named "0", "1", ... (nn.ModuleList); no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  /// Takes each module by value (moved or copied in). One ModuleList argument is a copy instead.
  template <ModuleValue... Ms>
    requires(sizeof...(Ms) >= 1 &&
             !(sizeof...(Ms) == 1 && (std::same_as<std::remove_cvref_t<Ms>, ModuleList> && ...)))
  explicit ModuleList(Ms&&... modules) {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  /// Appends `module`, moved or copied in.
  template <ModuleValue M>
  void push_back(M&& module) {
    push_back(std::shared_ptr<Module>(std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(module))));
  }
  /// Shared, not copied. tg::Error for a null module or one that is or contains this list (a cycle
  /// that every walk over the tree would follow forever).
  void push_back(std::shared_ptr<Module> module);
  /// Inserts before position `index` (0 ≤ index ≤ size()), as list.insert; later children renumber.
  void insert(size_t index, std::shared_ptr<Module> module);
  /// Inserts `module`, moved or copied in, before position `index`.
  template <ModuleValue M>
  void insert(size_t index, M&& module) {
    insert(index, std::shared_ptr<Module>(std::make_shared<std::remove_cvref_t<M>>(std::forward<M>(module))));
  }
  /// Appends every child of `other` (shared), as ModuleList.extend.
  void extend(const ModuleList& other);

  size_t size() const { return children_.size(); }  ///< the number of children
  bool empty() const { return children_.empty(); }  ///< no children
  Module& operator[](size_t index);  ///< tg::Error when out of range
  /// The child at `index` as an M; tg::Error when out of range or of another type.
  template <class M>
  M& at(size_t index) {
    M* child = dynamic_cast<M*>(&(*this)[index]);
    check(child != nullptr, kind_, "child ", index, " is not of the requested module type");
    return *child;
  }
  /// The child itself, shared: to put one module into two containers.
  std::shared_ptr<Module> ptr(size_t index);

  /// Iterates over the children as Module&.
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;  ///< a forward iterator
    using value_type = Module;                             ///< what it visits
    using difference_type = std::ptrdiff_t;                ///< a distance between two
    using pointer = Module*;                               ///< operator->'s
    using reference = Module&;                             ///< operator*'s
    Iterator() = default;
    explicit Iterator(std::vector<std::shared_ptr<Module>>::const_iterator it) : it_(it) {}  ///< at `it`
    Module& operator*() const { return **it_; }        ///< the child
    Module* operator->() const { return it_->get(); }  ///< the child
    /// To the next child.
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    Iterator operator++(int) { return Iterator(it_++); }  ///< to the next child, returning the old position
    bool operator==(const Iterator&) const = default;     ///< at the same child

   private:
    std::vector<std::shared_ptr<Module>>::const_iterator it_;
  };
  Iterator begin() const { return Iterator(children_.begin()); }  ///< the first child
  Iterator end() const { return Iterator(children_.end()); }      ///< past the last child

  /// A ModuleList has no forward (as in PyTorch): tg::Error. Sequential overrides it.
  Tensor forward(const Tensor& x) override;
  void members(Members& m) override;

 protected:
  /// `kind` ("Sequential") names the container in errors.
  explicit ModuleList(const char* kind) : kind_(kind) {}
  /// `a = b` makes a share b's children (as copying does), whatever their parameters.
  bool assigns_parameter_values() const override { return false; }

 private:
  // insert and push_back; `method` names the call in errors.
  void add(size_t index, std::shared_ptr<Module> module, const char* method);

  const char* kind_ = "ModuleList";
  std::vector<std::shared_ptr<Module>> children_;
};

}  // namespace tg::nn
