/// @file
/// tg::optim::Optimizer — the protocol every optimizer implements, modelled on torch.optim.Optimizer:
/// parameter groups with their own hyper-parameters, per-parameter state, zero_grad and step, and a
/// state dict in PyTorch's layout that checkpoints store.
///
/// @code
///   tg::optim::SGD opt(body.parameters(), {.lr = 0.1, .momentum = 0.9});
///   opt.add_param_group(head.parameters(), {.lr = 0.01});  // its own lr, the constructor's momentum
///   opt.zero_grad();   // every parameter's grad becomes undefined
///   loss.backward();   // ... and is created afresh by the backward pass
///   opt.step();        // parameters whose grad is still undefined are skipped
///   tg::optim::OptimizerStateDict state = opt.state_dict();
/// @endcode
///
/// Updates run outside the tape: they write parameter storage directly, so no NoGradGuard is needed.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::optim {

/// A hyper-parameter as PyTorch's param_groups hold it: a number (lr, momentum), a flag (nesterov),
/// a tuple of numbers (Adam's betas) or a name (LBFGS's line_search_fn; "" for PyTorch's None).
using OptionValue = std::variant<double, bool, std::vector<double>, std::string>;
using OptionValues = std::map<std::string, OptionValue>;  ///< a group's hyper-parameters by PyTorch's names

/// The named state tensors of one parameter (SGD: "momentum_buffer"), each of its parameter's shape
/// and dtype, except "step" (kStepState).
using ParamState = std::map<std::string, Tensor>;

/// The state "step" of Adam, AdamW, RMSprop and Adagrad: how many updates this parameter received,
/// a 0-d float64 tensor (PyTorch keeps a float32 one, which stops counting at 2^24 steps).
inline constexpr const char* kStepState = "step";

/// One entry of state_dict().param_groups: the group's hyper-parameters by PyTorch's names and its
/// parameters as indices into Optimizer::parameters().
struct ParamGroupState {
  OptionValues options;         ///< "lr", "momentum", ...
  std::vector<int64_t> params;  ///< indices into Optimizer::parameters()
};

/// optimizer.state_dict() in PyTorch's layout: {"state": {index: {name: tensor}}, "param_groups":
/// [{options..., "params": [indices]}]}, plus tapegrad's step count.
struct OptimizerStateDict {
  std::map<int64_t, ParamState> state;  ///< parameters without state yet have no entry
  std::vector<ParamGroupState> param_groups;  ///< one per parameter group
  int64_t step_count = 0;                     ///< calls to step() so far
};

/// The base of every optimizer: parameter groups, per-parameter state, step() and state dicts.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Not copyable (so not movable either): a copy would share parameters and optimizer state with
  /// the original, and schedulers keep a reference to the optimizer they drive.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// The optimizer's class name, as errors and checkpoints give it ("SGD").
  const char* name() const { return name_; }

  /// One update of every parameter whose grad is defined, group by group. Every grad is checked
  /// first (its parameter's dtype and shape), so that a bad one leaves every parameter as it was.
  /// State made before Module::to changed a parameter's dtype is converted to the new dtype first.
  /// Virtual so that an optimizer that needs a closure (LBFGS) can refuse it.
  virtual void step();
  /// Sets every parameter's grad to undefined (PyTorch 2's zero_grad(set_to_none=True)): the next
  /// backward then writes a fresh gradient instead of adding into a zeroed one.
  void zero_grad();

  /// The number of parameter groups, PyTorch's len(optimizer.param_groups): the constructor's, then
  /// one per add_param_group. Groups are numbered from 0 in that order.
  size_t param_group_count() const { return group_sizes_.size(); }
  /// Every parameter, group after group: index i here is index i of state_dict().
  const std::vector<Tensor>& parameters() const { return params_; }
  /// The parameters of one group, in the order they were given.
  std::vector<Tensor> group_parameters(size_t group) const;

  /// The learning rate of `group`, PyTorch's optimizer.param_groups[group]["lr"] (for any optimizer;
  /// the typed options(group) of SGD, Adam, ... hold it too).
  double lr(size_t group = 0) const;
  void set_lr(double lr);                ///< every group: what learning-rate schedulers call
  /// One group's: param_groups[group]["lr"] = lr; lr must be finite and >= 0.
  void set_lr(size_t group, double lr);

  /// PyTorch's group["initial_lr"]: the lr a group had when the first learning-rate scheduler was
  /// built on it, which every scheduler of the group then starts from (its base_lr), however the
  /// schedulers built before it changed the lr. Unset until then (OneCycleLR sets its own). It is
  /// one of the group's options in state_dict() once set, as in PyTorch's param_groups.
  std::optional<double> initial_lr(size_t group) const;
  void set_initial_lr(size_t group, double lr);  ///< lr must be finite and >= 0

  /// The momentum that cyclic schedules (OneCycleLR) drive, as PyTorch's reads it: the group's
  /// "momentum" (SGD, RMSprop) or the first of its "betas" (Adam, AdamW). has_momentum() is false
  /// for an optimizer with neither (Adagrad); the others then throw tg::Error.
  ///@{
  bool has_momentum() const;
  double momentum(size_t group) const;
  ///@}
  void set_momentum(size_t group, double momentum);  ///< validated like the group's other options

  int64_t step_count() const { return step_count_; }  ///< calls to step() so far
  /// The state of parameter `index` of parameters(): empty until its first update. These are the
  /// live tensors: clone them to keep a snapshot (a step after Module::to replaces them with
  /// tensors of the parameter's new dtype).
  const ParamState& state(size_t index) const;

  /// The live state (as PyTorch's, the tensors are not copies) and every group's hyper-parameters.
  OptimizerStateDict state_dict() const;
  /// Throws tg::Error saying what does not fit this optimizer — the number of groups and of their
  /// parameters, an index no group lists, an unknown state name, a shape, an option missing,
  /// unknown, of the wrong type or invalid — and changes nothing then.
  void check_state_dict(const OptimizerStateDict& state_dict) const;
  /// check_state_dict, then installs copies of the state tensors (converted to each parameter's
  /// dtype, as PyTorch's load_state_dict does), the options and the step count. Parameters are
  /// matched by position in their group, as PyTorch does.
  void load_state_dict(const OptimizerStateDict& state_dict);

 protected:
  /// Starts the first group; `name` ("SGD") names the optimizer in errors.
  Optimizer(const char* name, std::vector<Tensor> params);

  /// Appends a group, after checking its parameters: a non-empty list, each defined, a leaf,
  /// requiring grad, and in no group yet (a parameter listed twice would be updated twice per step).
  /// The derived class checks the group's options before and stores them after.
  void add_group(std::vector<Tensor> params);

  /// The update of one parameter of `group` whose grad is defined, of its dtype and shape.
  virtual void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) = 0;

  /// The hyper-parameters of `group` by PyTorch's names ("lr", "momentum", "nesterov", ...).
  virtual OptionValues group_options(size_t group) const = 0;
  /// Throws tg::Error unless `options` holds exactly this optimizer's hyper-parameters, each of the
  /// right type and valid.
  virtual void check_group_options(const OptionValues& options) const = 0;
  /// Installs options that check_group_options accepted.
  virtual void set_group_options(size_t group, const OptionValues& options) = 0;
  virtual double group_lr(size_t group) const = 0;  ///< the lr of `group`
  virtual void set_group_lr(size_t group, double lr) = 0;  ///< lr already checked
  /// The names of the per-parameter state this optimizer keeps ("momentum_buffer").
  virtual std::vector<std::string> state_names() const = 0;
  /// Whether the state `name` stays float64 whatever its parameter's dtype (a count such as "step"),
  /// rather than following the parameter's dtype.
  virtual bool keeps_float64(const std::string& name) const { return name == kStepState; }
  /// Throws tg::Error unless `tensor` fits as the state `name` of `param` (index `index` of the state
  /// dict, for the message): by default a 0-d whole-number count for "step", the parameter's shape
  /// for the others, floating point.
  virtual void check_state_tensor(const Tensor& param, int64_t index, const std::string& name,
                                  const Tensor& tensor) const;

  /// The live state of parameter `index`, for an optimizer whose step does not go through update().
  ParamState& mutable_state(size_t index) { return state_.at(index); }
  /// Counts one call to step(), for an optimizer that overrides it.
  void count_step() { ++step_count_; }
  /// Converts the state of parameter `index` to its parameter's dtype, when Module::to changed it.
  void follow_dtype(size_t index);

 private:

  const char* name_;
  std::vector<Tensor> params_;       // every group's, group after group
  std::vector<size_t> group_sizes_;  // how many of params_ each group holds
  std::vector<ParamState> state_;    // state_[i] belongs to params_[i]
  std::vector<std::optional<double>> initial_lrs_;  // one per group
  int64_t step_count_ = 0;
};

/// std::optional<std::array<double, N>> that also takes the N numbers themselves, so that a
/// group's `.betas = {0.9, 0.95}` is spelt as the constructor's (std::optional alone needs
/// `{{0.9, 0.95}}`).
template <size_t N>
struct OptionalArray : std::optional<std::array<double, N>> {
  using std::optional<std::array<double, N>>::optional;
  OptionalArray() = default;  ///< not given
  /// Given: the N numbers.
  template <typename... Numbers>
    requires(sizeof...(Numbers) == N && (std::convertible_to<Numbers, double> && ...))
  OptionalArray(Numbers... numbers)  // NOLINT(google-explicit-constructor): `.betas = {0.9, 0.95}`
      : std::optional<std::array<double, N>>(std::array<double, N>{static_cast<double>(numbers)...}) {}
};

/// The part of every optimizer that only depends on its options structs: the groups' options,
/// typed, and add_param_group. `Options` (SGDOptions) holds every hyper-parameter, with the
/// constructor's defaults; `GroupOptions` (SGDGroupOptions) the same fields as std::optional, for
/// a group that gives some and inherits the others, as PyTorch fills a group's missing keys from
/// optimizer.defaults. Options must have an `lr`; the derived class validates and names them.
template <typename Options, typename GroupOptionsT>
class OptimizerWithOptions : public Optimizer {
 public:
  /// The options a group gives, each std::optional: those left unset are inherited
  /// (`AdamW::GroupOptions{.weight_decay = 0.0}`).
  using GroupOptions = GroupOptionsT;

  /// A new group (PyTorch: optimizer.add_param_group({"params": ..., "weight_decay": 0.0})) with
  /// the options `given`, and the constructor's (defaults()) for every option it does not give:
  /// @code
  ///   tg::optim::AdamW opt(decay, {.lr = 3e-3, .betas = {0.9, 0.95}, .weight_decay = 0.1});
  ///   opt.add_param_group(no_decay, {.weight_decay = 0.0});  // lr 3e-3 and betas (0.9, 0.95) too
  /// @endcode
  /// Its parameters must be in no group yet; the options are validated as the constructor's.
  void add_param_group(std::vector<Tensor> params, const GroupOptions& given = {}) {
    add_param_group(std::move(params), inherit(given, defaults_));
  }
  /// A new group with exactly `options`, every field as the struct holds it (a whole options
  /// struct gives every option: copy defaults() to start from the constructor's).
  template <std::same_as<Options> WholeOptions>
  void add_param_group(std::vector<Tensor> params, const WholeOptions& options) {
    check_options(options);
    add_group(std::move(params));
    group_options_.push_back(options);
  }

  const Options& defaults() const { return defaults_; }  ///< the constructor's options
  /// The options of `group`: PyTorch's optimizer.param_groups[group], e.g. options(1).weight_decay.
  const Options& options(size_t group = 0) const {
    check_group_index(group);
    return group_options_[group];
  }
  /// Changes the options `changes` gives and keeps the group's others (PyTorch:
  /// optimizer.param_groups[group]["weight_decay"] = 0.0): set_options(1, {.weight_decay = 0.0}).
  /// Validated like the constructor's; on error the group keeps all its options.
  void set_options(size_t group, const GroupOptions& changes) {
    check_group_index(group);
    set_options(group, inherit(changes, group_options_[group]));
  }
  /// Replaces every option of `group` by the whole struct `options`. Validated like the constructor's.
  template <std::same_as<Options> WholeOptions>
  void set_options(size_t group, const WholeOptions& options) {
    check_group_index(group);
    check_options(options);
    group_options_[group] = options;
  }

 protected:
  /// `options` must be valid: the derived constructor passes them through its check first.
  OptimizerWithOptions(const char* name, std::vector<Tensor> params, Options options)
      : Optimizer(name, std::move(params)), defaults_(options), group_options_{options} {}

  /// Throws tg::Error naming the first invalid option.
  virtual void check_options(const Options& options) const = 0;
  /// The options `given` sets, and those of `inherited` for the others.
  virtual Options inherit(const GroupOptions& given, const Options& inherited) const = 0;
  /// The options from their PyTorch names; throws tg::Error as check_group_options promises.
  virtual Options parse_options(const OptionValues& values) const = 0;
  virtual OptionValues option_values(const Options& options) const = 0;  ///< the options by their PyTorch names

 private:
  void check_group_index(size_t group) const {
    check(group < group_options_.size(), name(), "expected a parameter group index below ", group_options_.size(),
          ", got ", group);
  }
  OptionValues group_options(size_t group) const override { return option_values(group_options_[group]); }
  void check_group_options(const OptionValues& values) const override { parse_options(values); }
  void set_group_options(size_t group, const OptionValues& values) override {
    group_options_[group] = parse_options(values);
  }
  double group_lr(size_t group) const override { return group_options_[group].lr; }
  void set_group_lr(size_t group, double lr) override { group_options_[group].lr = lr; }

  Options defaults_;
  std::vector<Options> group_options_;  // one per parameter group
};

}  // namespace tg::optim
