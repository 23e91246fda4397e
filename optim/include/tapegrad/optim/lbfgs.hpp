/// @file
/// tg::optim::LBFGS — limited-memory BFGS, exactly torch.optim.LBFGS (PyTorch 1.13): each step()
/// runs up to max_iter quasi-Newton iterations, calling the closure to re-evaluate the loss and its
/// gradient, with either a fixed step of length lr or PyTorch's strong-Wolfe line search (cubic
/// interpolation, c1 = 1e-4, c2 = 0.9, at most 25 evaluations).
///
/// One iteration, over the parameters flattened into one vector x with gradient g:
/// @code
///   first iteration ever:  d = -g,  H = 1
///   otherwise:             y = g - g_prev,  s = t_prev d_prev
///                          if y·s > 1e-10: remember (y, s, ρ = 1 / y·s) (at most history_size pairs)
///                                          and H = y·s / y·y
///                          d = -H₀⁻¹g by the two-loop recursion over the remembered pairs, H₀ = H·I
///   t = lr                 (the very first iteration: min(1, 1 / Σ|g|) · lr)
///   stop if g·d > -tolerance_change
///   x = x + t d            (t from the line search when line_search_fn = "strong_wolfe")
/// @endcode
/// and it stops after max_iter iterations, max_eval closure calls, when max|g| <= tolerance_grad,
/// when max|t d| <= tolerance_change or when the loss changed by less than tolerance_change.
///
/// @code
///   tg::optim::LBFGS opt(model.parameters(), {.max_iter = 50, .line_search_fn = "strong_wolfe"});
///   for (int epoch = 0; epoch < 10; ++epoch)
///     opt.step([&] {
///       opt.zero_grad();
///       tg::Tensor loss = criterion(model(x), y);
///       loss.backward();
///       return loss;
///     });
/// @endcode
///
/// Its state, as PyTorch's, is global but kept as the state of the first parameter: "func_evals",
/// "n_iter" (counts), "d" and "prev_flat_grad" (flat vectors of all parameters' numel N), "t" and
/// "prev_loss" (0-d float64), "H_diag" (0-d), and the history "old_dirs" (the y's) and "old_stps"
/// (the s's) as [k, N] tensors, oldest first, with "ro" [k]. It needs (2 history_size + 3) N
/// numbers of memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim {

/// Declared in PyTorch's keyword order, so that designated initialisers read like its arguments.
struct LBFGSOptions {
  double lr = 1;                  ///< the step length of the fixed step, the first trial of the line search
  int64_t max_iter = 20;          ///< iterations per step() at most
  std::optional<int64_t> max_eval = std::nullopt;  ///< closure calls per step() at most; default max_iter * 5 / 4
  double tolerance_grad = 1e-7;     ///< stop once max|g| <= tolerance_grad
  double tolerance_change = 1e-9;   ///< stop once the step or the change of the loss is smaller
  int64_t history_size = 100;       ///< the number of (y, s) pairs remembered
  std::optional<std::string> line_search_fn = std::nullopt;  ///< std::nullopt (a fixed step) or "strong_wolfe"
};

/// L-BFGS, as torch.optim.LBFGS (lbfgs.hpp): one parameter group, every parameter of one floating
/// dtype; step() needs a closure.
class LBFGS : public Optimizer {
 public:
  /// Rejects lr < 0, max_iter < 1, max_eval < 1, tolerances < 0, history_size < 1 (and NaN or an
  /// infinity), a line_search_fn other than "strong_wolfe", and parameters of different or
  /// non-floating dtypes, with a tg::Error naming the option and the value. max_eval is resolved
  /// to max_iter * 5 / 4 when not given, as PyTorch stores it.
  LBFGS(std::vector<Tensor> params, LBFGSOptions options = {});

  /// Runs the iterations, calling `closure` (which must zero the gradients, compute the loss, call
  /// backward and return the loss, a one-element tensor) once to start and once per evaluation
  /// after. Returns the closure's first loss, as PyTorch does. Parameters without a gradient count
  /// as a zero gradient.
  Tensor step(std::function<Tensor()> closure);
  /// Throws tg::Error: L-BFGS re-evaluates the loss, so it needs step(closure).
  void step() override;

  const LBFGSOptions& options() const { return options_; }  ///< max_eval resolved
  /// Validated like the constructor's; max_eval resolved when not given.
  void set_options(LBFGSOptions options);

 private:
  void update(size_t group, Tensor& param, const Tensor& grad, ParamState& state) override;
  OptionValues group_options(size_t group) const override;
  void check_group_options(const OptionValues& options) const override;
  void set_group_options(size_t group, const OptionValues& options) override;
  double group_lr(size_t /*group*/) const override { return options_.lr; }
  void set_group_lr(size_t /*group*/, double lr) override { options_.lr = lr; }
  std::vector<std::string> state_names() const override;
  bool keeps_float64(const std::string& name) const override;
  void check_state_tensor(const Tensor& param, int64_t index, const std::string& name,
                          const Tensor& tensor) const override;

  LBFGSOptions options_;
  int64_t numel_ = 0;  // of all parameters: the length of the flat vectors
};

}  // namespace tg::optim
