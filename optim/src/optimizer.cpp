#include "tapegrad/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "out_of_memory.hpp"

namespace tg::optim {

Optimizer::Optimizer(const char* name, std::vector<Tensor> params) : name_(name) { add_group(std::move(params)); }

void Optimizer::add_group(std::vector<Tensor> params) {
  // The usual cause: a module whose members() declares nothing, so model.parameters() is empty.
  check(!params.empty(), name_, "expected at least one parameter, got an empty list (a module's parameters() ",
        "lists only what its members() declares: declare each child module with m.module(\"name\", child) and ",
        "each parameter of its own with m.parameter(\"name\", p))");
  for (size_t j = 0; j < params.size(); ++j) {
    const Tensor& param = params[j];
    const size_t i = params_.size() + j;  // its index in parameters() once added
    check(param.defined(), name_, "parameter ", i, " is an undefined tensor");
    check(param.is_leaf(), name_, "expected parameter ", i, " (shape ", param.shape(),
          ") to be a leaf, got the result of ", param.grad_fn_name());
    check(param.requires_grad(), name_, "expected parameter ", i, " (shape ", param.shape(),
          ") to require grad, got requires_grad = false");
    // Quadratic, but parameter lists are short and this runs once per group.
    for (size_t k = 0; k < i; ++k) {
      const Tensor& earlier = k < params_.size() ? params_[k] : params[k - params_.size()];
      check(!earlier.is_same(param), name_, "parameter ", i, " (shape ", param.shape(),
            ") is the same tensor as parameter ", k, "; each parameter must be listed once, in one group");
    }
  }
  state_.resize(state_.size() + params.size());
  group_sizes_.push_back(params.size());
  initial_lrs_.emplace_back();
  params_.insert(params_.end(), std::make_move_iterator(params.begin()), std::make_move_iterator(params.end()));
}

std::vector<Tensor> Optimizer::group_parameters(size_t group) const {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  size_t begin = 0;
  for (size_t g = 0; g < group; ++g) begin += group_sizes_[g];
  return {params_.begin() + static_cast<std::ptrdiff_t>(begin),
          params_.begin() + static_cast<std::ptrdiff_t>(begin + group_sizes_[group])};
}

void Optimizer::step() try {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = params_[i].grad();
    if (!grad.defined()) continue;
    check(grad.dtype() == params_[i].dtype() && grad.shape() == params_[i].shape(), name_, "expected parameter ", i,
          "'s grad to be ", params_[i].dtype(), " of shape ", params_[i].shape(), ", got ", grad.dtype(), " of shape ",
          grad.shape());
  }
  for (size_t i = 0; i < params_.size(); ++i) follow_dtype(i);
  size_t i = 0;
  for (size_t group = 0; group < group_sizes_.size(); ++group) {
    for (size_t end = i + group_sizes_[group]; i < end; ++i) {
      const Tensor grad = params_[i].grad();
      if (grad.defined()) update(group, params_[i], grad, state_[i]);  // else: it took no part in the loss
    }
  }
  ++step_count_;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(name_);
}

void Optimizer::follow_dtype(size_t index) {
  // Module::to changed the parameter's dtype after this state was made: convert the state, as
  // PyTorch's load_state_dict casts state to its parameter's dtype. The step count stays float64.
  const Tensor& param = params_[index];
  for (auto& [name, tensor] : state_[index]) {
    if (keeps_float64(name) || tensor.dtype() == param.dtype()) continue;
    tensor = tensor.detach().to(param.dtype());
  }
}

void Optimizer::zero_grad() {
  for (Tensor& param : params_) param.set_grad(Tensor());
}

double Optimizer::lr(size_t group) const {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  return group_lr(group);
}

void Optimizer::set_lr(double lr) {
  for (size_t group = 0; group < group_sizes_.size(); ++group) set_lr(group, lr);
}

void Optimizer::set_lr(size_t group, double lr) {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  // lr >= 0 is false for NaN, so this rejects NaN too.
  check(lr >= 0, name_, "expected lr >= 0, got ", lr);
  check(std::isfinite(lr), name_, "expected a finite lr, got ", lr);
  set_group_lr(group, lr);
}

std::optional<double> Optimizer::initial_lr(size_t group) const {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  return initial_lrs_[group];
}

void Optimizer::set_initial_lr(size_t group, double lr) {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  // lr >= 0 is false for NaN, so this rejects NaN too.
  check(lr >= 0 && std::isfinite(lr), name_, "expected a finite initial_lr >= 0, got ", lr);
  initial_lrs_[group] = lr;
}

namespace {

// PyTorch's param_groups hold "initial_lr" beside the optimizer's own options once a scheduler set
// it: the options without it, and its value, checked, when present.
constexpr const char* kInitialLr = "initial_lr";

std::pair<OptionValues, std::optional<double>> split_initial_lr(const OptionValues& options, const char* op) {
  OptionValues own = options;
  const auto it = own.find(kInitialLr);
  if (it == own.end()) return {std::move(own), std::nullopt};
  const double* lr = std::get_if<double>(&it->second);
  check(lr != nullptr, op, "load_state_dict: expected 'initial_lr' to be a number");
  check(*lr >= 0 && std::isfinite(*lr), op, "load_state_dict: expected a finite 'initial_lr' >= 0, got ", *lr);
  const double value = *lr;
  own.erase(it);
  return {std::move(own), value};
}

// Where a group's momentum lives among its options: "momentum" or the first of "betas".
const char* momentum_key(const OptionValues& options) {
  if (options.count("momentum")) return "momentum";
  if (options.count("betas")) return "betas";
  return nullptr;
}

}  // namespace

bool Optimizer::has_momentum() const { return momentum_key(group_options(0)) != nullptr; }

double Optimizer::momentum(size_t group) const {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  const OptionValues options = group_options(group);
  const char* key = momentum_key(options);
  check(key != nullptr, name_, "has neither a momentum nor betas");
  const OptionValue& value = options.at(key);
  return std::holds_alternative<double>(value) ? std::get<double>(value) : std::get<std::vector<double>>(value)[0];
}

void Optimizer::set_momentum(size_t group, double momentum) {
  check(group < group_sizes_.size(), name_, "expected a parameter group index below ", group_sizes_.size(), ", got ",
        group);
  OptionValues options = group_options(group);
  const char* key = momentum_key(options);
  check(key != nullptr, name_, "has neither a momentum nor betas");
  OptionValue& value = options.at(key);
  if (std::holds_alternative<double>(value))
    value = momentum;
  else
    std::get<std::vector<double>>(value)[0] = momentum;
  check_group_options(options);
  set_group_options(group, options);
}

const ParamState& Optimizer::state(size_t index) const {
  check(index < state_.size(), name_, "expected a parameter index below ", state_.size(), ", got ", index);
  return state_[index];
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict result;
  for (size_t i = 0; i < state_.size(); ++i)
    if (!state_[i].empty()) result.state.emplace(static_cast<int64_t>(i), state_[i]);
  int64_t index = 0;
  for (size_t group = 0; group < group_sizes_.size(); ++group) {
    ParamGroupState entry{.options = group_options(group), .params = {}};
    if (initial_lrs_[group]) entry.options.emplace(kInitialLr, *initial_lrs_[group]);
    for (size_t k = 0; k < group_sizes_[group]; ++k) entry.params.push_back(index++);
    result.param_groups.push_back(std::move(entry));
  }
  result.step_count = step_count_;
  return result;
}

namespace {

// Where each index of a state dict's param_groups points among the optimizer's parameters: the
// k-th index of group g is the k-th parameter of group g. Checks the group structure on the way.
std::map<int64_t, size_t> match_indices(const OptimizerStateDict& state_dict, const std::vector<size_t>& group_sizes,
                                        const char* op) {
  check(state_dict.param_groups.size() == group_sizes.size(), op, "load_state_dict: expected ", group_sizes.size(),
        " parameter groups, got ", state_dict.param_groups.size());
  std::map<int64_t, size_t> own_index;
  size_t next = 0;
  for (size_t group = 0; group < group_sizes.size(); ++group) {
    const std::vector<int64_t>& indices = state_dict.param_groups[group].params;
    check(indices.size() == group_sizes[group], op, "load_state_dict: expected group ", group, " to hold ",
          group_sizes[group], " parameters, got ", indices.size());
    for (int64_t index : indices) {
      const bool fresh = own_index.emplace(index, next++).second;
      check(fresh, op, "load_state_dict: parameter index ", index, " is listed twice in param_groups");
    }
  }
  return own_index;
}

}  // namespace

void Optimizer::check_state_tensor(const Tensor& param, int64_t index, const std::string& name,
                                   const Tensor& tensor) const {
  const Shape expected_shape = name == kStepState ? Shape{} : param.shape();
  check(tensor.defined() && tensor.shape() == expected_shape, name_, "load_state_dict: expected the '", name,
        "' of parameter index ", index, name == kStepState ? " to be a 0-d count " : " to have its parameter's shape ",
        expected_shape, ", got ", tensor.defined() ? tensor.shape() : Shape{}, tensor.defined() ? "" : " (undefined)");
  check(tensor.dtype() == kFloat32 || tensor.dtype() == kFloat64, name_, "load_state_dict: expected the '", name,
        "' of parameter index ", index, " to be floating point, got ", tensor.dtype());
  if (name == kStepState) {
    // The bias corrections take beta^step: a negative or fractional count would corrupt them.
    const double steps = tensor.to(kFloat64).item<double>();
    check(steps >= 0 && std::isfinite(steps) && steps == std::floor(steps), name_,
          "load_state_dict: expected the 'step' of parameter index ", index, " to be a whole number >= 0, got ",
          steps);
  }
}

void Optimizer::check_state_dict(const OptimizerStateDict& state_dict) const {
  const std::map<int64_t, size_t> own_index = match_indices(state_dict, group_sizes_, name_);
  const std::vector<std::string> names = state_names();
  for (const auto& [index, entries] : state_dict.state) {
    auto it = own_index.find(index);
    check(it != own_index.end(), name_, "load_state_dict: state for parameter index ", index,
          ", which no parameter group lists");
    const Tensor& param = params_[it->second];
    for (const auto& [name, tensor] : entries) {
      check(std::find(names.begin(), names.end(), name) != names.end(), name_, "load_state_dict: unknown state '",
            name, "' for parameter index ", index);
      check_state_tensor(param, index, name, tensor);
    }
  }
  for (const ParamGroupState& group : state_dict.param_groups)
    check_group_options(split_initial_lr(group.options, name_).first);
  check(state_dict.step_count >= 0, name_, "load_state_dict: expected step_count >= 0, got ", state_dict.step_count);
}

void Optimizer::load_state_dict(const OptimizerStateDict& state_dict) {
  check_state_dict(state_dict);
  const std::map<int64_t, size_t> own_index = match_indices(state_dict, group_sizes_, name_);
  // Copies, cut from the tape and in the parameter's dtype: later steps must not write into the
  // caller's tensors.
  std::vector<ParamState> state(params_.size());
  for (const auto& [index, entries] : state_dict.state) {
    const size_t i = own_index.at(index);
    for (const auto& [name, tensor] : entries) {
      const DType dtype = keeps_float64(name) ? kFloat64 : params_[i].dtype();
      state[i].emplace(name, tensor.detach().to(dtype).clone());
    }
  }
  // As PyTorch replaces its param_groups: a group whose entry has no "initial_lr" loses its own.
  for (size_t group = 0; group < group_sizes_.size(); ++group) {
    auto [options, initial_lr] = split_initial_lr(state_dict.param_groups[group].options, name_);
    set_group_options(group, options);
    initial_lrs_[group] = initial_lr;
  }
  state_ = std::move(state);
  step_count_ = state_dict.step_count;
}

}  // namespace tg::optim
