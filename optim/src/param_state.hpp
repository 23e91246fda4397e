// Creating a parameter's optimizer state on its first update. Private to optim.
#pragma once

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim::param_state {

// The state `name` of a parameter, of its shape and dtype, filled with `initial` when created.
inline Tensor& buffer(ParamState& state, const char* name, const Tensor& param, double initial = 0.0) {
  auto [it, inserted] = state.try_emplace(name);
  if (inserted) it->second = full(param.shape(), initial, param.dtype());
  return it->second;
}

// Counts one more update in the state "step" (created at 0) and returns the new count t >= 1.
inline double advance_step(ParamState& state) {
  auto [it, inserted] = state.try_emplace(kStepState);
  if (inserted) it->second = zeros({}, kFloat64);
  double& step = it->second.mutable_data<double>()[0];
  step += 1;
  return step;
}

}  // namespace tg::optim::param_state
