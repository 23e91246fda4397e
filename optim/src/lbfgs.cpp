#include "tapegrad/optim/lbfgs.hpp"

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include "dispatch.hpp"
#include "option_values.hpp"
#include "out_of_memory.hpp"
#include "tensor_impl.hpp"

namespace tg::optim {

namespace {

constexpr const char* kOp = "LBFGS";
constexpr const char* kStrongWolfe = "strong_wolfe";

// State names, PyTorch's.
constexpr const char* kFuncEvals = "func_evals";
constexpr const char* kNIter = "n_iter";
constexpr const char* kDirection = "d";
constexpr const char* kStepLength = "t";
constexpr const char* kOldDirs = "old_dirs";
constexpr const char* kOldStps = "old_stps";
constexpr const char* kRo = "ro";
constexpr const char* kHDiag = "H_diag";
constexpr const char* kPrevFlatGrad = "prev_flat_grad";
constexpr const char* kPrevLoss = "prev_loss";

// The strong-Wolfe search's constants, which torch.optim.LBFGS does not expose (it does not pass
// its own tolerance_change either).
constexpr double kC1 = 1e-4;       // sufficient decrease: f(t) <= f + c1 t g·d
constexpr double kC2 = 0.9;        // curvature: |g(t)·d| <= -c2 g·d
constexpr double kLineSearchTolerance = 1e-9;
constexpr int kMaxLineSearch = 25;

void check_whole(const char* key, double value, double minimum) {
  check(value >= minimum && std::isfinite(value) && value == std::floor(value), kOp, "expected ", key,
        " to be a whole number >= ", minimum, ", got ", value);
}

LBFGSOptions resolved(LBFGSOptions o) {
  options::check_non_negative(kOp, "lr", o.lr);
  check(o.max_iter >= 1, kOp, "expected max_iter >= 1, got ", o.max_iter);
  if (!o.max_eval) o.max_eval = o.max_iter * 5 / 4;
  check(*o.max_eval >= 1, kOp, "expected max_eval >= 1, got ", *o.max_eval,
        " (the default is max_iter * 5 / 4)");
  options::check_non_negative(kOp, "tolerance_grad", o.tolerance_grad);
  options::check_non_negative(kOp, "tolerance_change", o.tolerance_change);
  check(o.history_size >= 1, kOp, "expected history_size >= 1, got ", o.history_size);
  check(!o.line_search_fn || *o.line_search_fn == kStrongWolfe, kOp,
        "expected line_search_fn to be \"strong_wolfe\" or std::nullopt, got \"",
        o.line_search_fn.value_or(""), "\"");
  return o;
}

// Python's max(a, b) and min(a, b), which keep a unless b compares greater (less): the same
// results as PyTorch's line search when a comparison involves NaN.
double py_max(double a, double b) { return b > a ? b : a; }
double py_min(double a, double b) { return b < a ? b : a; }

// The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped to
// [xmin_bound, xmax_bound] (the interval's ends when no bounds are given); the interval's middle
// when the cubic has no minimum. torch.optim.lbfgs._cubic_interpolate, operation for operation:
//   d1 = g1 + g2 - 3 (f1 - f2) / (x1 - x2),  d2 = sqrt(d1² - g1 g2)
//   min_pos = x2 - (x2 - x1) (g2 + d2 - d1) / (g2 - g1 + 2 d2)   (x1 <= x2; mirrored otherwise)
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [xmin_bound, xmax_bound] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square >= 0) {
    const double d2 = std::sqrt(d2_square);
    const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                    : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return py_min(py_max(min_pos, xmin_bound), xmax_bound);
  }
  return (xmin_bound + xmax_bound) / 2.;
}

// One step of L-BFGS over the parameters flattened into vectors of T ([N], N = all parameters'
// numel), with the scalars in double (PyTorch's Python floats, and its 0-d float64 tensors).
template <typename T>
class Run {
 public:
  using Vector = std::vector<T>;

  Run(const std::vector<Tensor>& params, int64_t numel, const std::function<Tensor()>& closure)
      : params_(params), numel_(static_cast<size_t>(numel)), closure_(closure) {}

  // The closure's loss, checked to be one number.
  Tensor evaluate() const {
    Tensor loss = closure_();
    check(loss.defined() && loss.numel() == 1, kOp, "expected the closure to return the loss, a one-element tensor, got ",
          loss.defined() ? to_string(loss.shape()) : std::string("an undefined tensor"));
    return loss;
  }

  // Every parameter's gradient, one after the other; zeros for a parameter without one.
  Vector gather_flat_grad() const {
    Vector flat(numel_);
    size_t offset = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& param = params_[i];
      const Tensor grad = param.grad();
      const size_t n = static_cast<size_t>(param.numel());
      if (grad.defined()) {
        check(grad.dtype() == param.dtype() && grad.shape() == param.shape(), kOp, "expected parameter ", i,
              "'s grad to be ", param.dtype(), " of shape ", param.shape(), ", got ", grad.dtype(), " of shape ",
              grad.shape());
        std::memcpy(flat.data() + offset, grad.data<T>(), n * sizeof(T));
      }  // else: it took no part in the loss, a zero gradient (PyTorch's p.new(p.numel()).zero_())
      offset += n;
    }
    return flat;
  }

  // x = x + step d, parameter by parameter (p.add_(d[offset:offset + numel], alpha=step)).
  void add_grad(double step, const Vector& d) const {
    const T alpha = static_cast<T>(step);
    size_t offset = 0;
    for (const Tensor& param : params_) {
      T* p = const_cast<Tensor&>(param).mutable_data<T>();
      const size_t n = static_cast<size_t>(param.numel());
      for (size_t j = 0; j < n; ++j) p[j] = p[j] + alpha * d[offset + j];
      offset += n;
      tg::detail::bump_version(param);  // a backward that saved the parameter must refuse it now
    }
  }

  Vector clone_params() const {
    Vector x(numel_);
    size_t offset = 0;
    for (const Tensor& param : params_) {
      const size_t n = static_cast<size_t>(param.numel());
      std::memcpy(x.data() + offset, param.data<T>(), n * sizeof(T));
      offset += n;
    }
    return x;
  }

  void set_params(const Vector& x) const {
    size_t offset = 0;
    for (const Tensor& param : params_) {
      const size_t n = static_cast<size_t>(param.numel());
      std::memcpy(const_cast<Tensor&>(param).mutable_data<T>(), x.data() + offset, n * sizeof(T));
      offset += n;
      tg::detail::bump_version(param);
    }
  }

  // The loss and gradient at x + t d, the parameters left at x (PyTorch's _directional_evaluate).
  std::pair<double, Vector> directional_evaluate(const Vector& x, double t, const Vector& d) const {
    add_grad(t, d);
    const double loss = evaluate().template item<double>();
    Vector flat_grad = gather_flat_grad();
    set_params(x);
    return {loss, std::move(flat_grad)};
  }

  struct LineSearchResult {
    double loss;
    Vector flat_grad;
    double t;
    int func_evals;
  };

  // torch.optim.lbfgs._strong_wolfe: bracket an interval holding a point that satisfies the strong
  // Wolfe conditions, then zoom into it by safeguarded cubic interpolation. f, g, gtd: the loss, the
  // gradient and g·d at t = 0.
  LineSearchResult strong_wolfe(const Vector& x, double t, const Vector& d, double f, const Vector& g,
                                double gtd) const {
    const double d_norm = max_abs(d);
    double f_new;
    Vector g_new;
    std::tie(f_new, g_new) = directional_evaluate(x, t, d);
    int ls_func_evals = 1;
    double gtd_new = dot(g_new, d);

    // Bracketing phase. Brackets hold one point (done) or two.
    double t_prev = 0, f_prev = f, gtd_prev = gtd;
    Vector g_prev = g;
    bool done = false;
    int ls_iter = 0;
    std::vector<double> bracket, bracket_f, bracket_gtd;
    std::vector<Vector> bracket_g;
    while (ls_iter < kMaxLineSearch) {
      if (f_new > (f + kC1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev)) {
        bracket = {t_prev, t};
        bracket_f = {f_prev, f_new};
        bracket_g = {g_prev, g_new};
        bracket_gtd = {gtd_prev, gtd_new};
        break;
      }
      if (std::abs(gtd_new) <= -kC2 * gtd) {
        bracket = {t};
        bracket_f = {f_new};
        bracket_g = {g_new};
        done = true;
        break;
      }
      if (gtd_new >= 0) {
        bracket = {t_prev, t};
        bracket_f = {f_prev, f_new};
        bracket_g = {g_prev, g_new};
        bracket_gtd = {gtd_prev, gtd_new};
        break;
      }
      // Extrapolate: the cubic's minimum, between just past t and 10 t.
      const double min_step = t + 0.01 * (t - t_prev);
      const double max_step = t * 10;
      const double previous = t;
      t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::pair{min_step, max_step});
      t_prev = previous;
      f_prev = f_new;
      g_prev = g_new;
      gtd_prev = gtd_new;
      std::tie(f_new, g_new) = directional_evaluate(x, t, d);
      ++ls_func_evals;
      gtd_new = dot(g_new, d);
      ++ls_iter;
    }
    if (ls_iter == kMaxLineSearch) {
      bracket = {0, t};
      bracket_f = {f, f_new};
      bracket_g = {g, g_new};
    }

    // Zoom phase: shrink the bracket around a point satisfying the conditions.
    bool insufficient_progress = false;
    size_t low_pos = bracket_f.front() <= bracket_f.back() ? 0 : 1;
    size_t high_pos = 1 - low_pos;
    while (!done && ls_iter < kMaxLineSearch) {
      if (std::abs(bracket[1] - bracket[0]) * d_norm < kLineSearchTolerance) break;  // the bracket is tiny
      t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]);
      // A trial within 10% of the bracket's length from one of its ends twice in a row, or outside
      // it, moves to 10% away from the nearer end.
      const double bracket_max = py_max(bracket[0], bracket[1]);
      const double bracket_min = py_min(bracket[0], bracket[1]);
      const double eps = 0.1 * (bracket_max - bracket_min);
      if (py_min(bracket_max - t, t - bracket_min) < eps) {
        if (insufficient_progress || t >= bracket_max || t <= bracket_min) {
          t = std::abs(t - bracket_max) < std::abs(t - bracket_min) ? bracket_max - eps : bracket_min + eps;
          insufficient_progress = false;
        } else {
          insufficient_progress = true;
        }
      } else {
        insufficient_progress = false;
      }
      std::tie(f_new, g_new) = directional_evaluate(x, t, d);
      ++ls_func_evals;
      gtd_new = dot(g_new, d);
      ++ls_iter;

      if (f_new > (f + kC1 * t * gtd) || f_new >= bracket_f[low_pos]) {
        // No sufficient decrease, or not below the lowest point: the trial is the new high end.
        bracket[high_pos] = t;
        bracket_f[high_pos] = f_new;
        bracket_g[high_pos] = g_new;
        bracket_gtd[high_pos] = gtd_new;
        low_pos = bracket_f[0] <= bracket_f[1] ? 0 : 1;
        high_pos = 1 - low_pos;
      } else {
        if (std::abs(gtd_new) <= -kC2 * gtd) {
          done = true;  // the strong Wolfe conditions hold
        } else if (gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0) {
          // The old high end becomes the new low end.
          bracket[high_pos] = bracket[low_pos];
          bracket_f[high_pos] = bracket_f[low_pos];
          bracket_g[high_pos] = bracket_g[low_pos];
          bracket_gtd[high_pos] = bracket_gtd[low_pos];
        }
        bracket[low_pos] = t;
        bracket_f[low_pos] = f_new;
        bracket_g[low_pos] = g_new;
        bracket_gtd[low_pos] = gtd_new;
      }
    }
    return {bracket_f[low_pos], std::move(bracket_g[low_pos]), bracket[low_pos], ls_func_evals};
  }

  static double dot(const Vector& a, const Vector& b) {
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    return static_cast<double>(static_cast<T>(sum));  // a 0-d tensor of T in PyTorch
  }
  static double max_abs(const Vector& a) {
    T result = 0;
    for (T v : a) result = std::abs(v) > result || std::isnan(v) ? std::abs(v) : result;
    return static_cast<double>(result);
  }
  static double abs_sum(const Vector& a) {
    double sum = 0;
    for (T v : a) sum += std::abs(static_cast<double>(v));
    return static_cast<double>(static_cast<T>(sum));
  }

 private:
  const std::vector<Tensor>& params_;
  size_t numel_;
  const std::function<Tensor()>& closure_;
};

// A flat vector of state as a tensor of shape `shape`, and back.
template <typename T>
Tensor to_tensor(const std::vector<T>& values, const Shape& shape) {
  Tensor result = empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(result.mutable_data<T>(), values.data(), values.size() * sizeof(T));
  return result;
}

template <typename T>
std::vector<T> to_vector_of(const Tensor& t) {
  const T* data = t.data<T>();
  return std::vector<T>(data, data + t.numel());
}

double scalar_of(const ParamState& state, const char* name, double fallback) {
  const auto it = state.find(name);
  return it == state.end() ? fallback : it->second.to(kFloat64).item<double>();
}

}  // namespace

LBFGS::LBFGS(std::vector<Tensor> params, LBFGSOptions options)
    : Optimizer(kOp, std::move(params)), options_(resolved(std::move(options))) {
  const std::vector<Tensor>& all = parameters();
  for (size_t i = 0; i < all.size(); ++i) {
    check(all[i].dtype() == kFloat32 || all[i].dtype() == kFloat64, kOp, "expected floating-point parameters, got ",
          all[i].dtype(), " for parameter ", i, tg::detail::cast_advice<tg::detail::FloatingDTypes>(all[i].dtype()));
    check(all[i].dtype() == all[0].dtype(), kOp, "expected every parameter to be ", all[0].dtype(),
          " as parameter 0 (they form one flat vector), got ", all[i].dtype(), " for parameter ", i);
    numel_ += all[i].numel();
  }
}

void LBFGS::set_options(LBFGSOptions options) { options_ = resolved(std::move(options)); }

void LBFGS::step() {
  check(false, kOp, "step() needs a closure that re-evaluates the loss: call step(closure), the closure calling "
                    "zero_grad(), computing the loss, calling backward() and returning the loss");
}

void LBFGS::update(size_t /*group*/, Tensor& /*param*/, const Tensor& /*grad*/, ParamState& /*state*/) {
  step();  // unreachable: step() is overridden
}

Tensor LBFGS::step(std::function<Tensor()> closure) try {
  check(closure != nullptr, kOp, "step(closure): expected a closure, got an empty std::function");
  const std::vector<Tensor>& params = parameters();
  for (size_t i = 0; i < params.size(); ++i) follow_dtype(i);
  for (size_t i = 0; i < params.size(); ++i)
    check(params[i].dtype() == params[0].dtype(), kOp, "expected every parameter to be ", params[0].dtype(),
          " as parameter 0, got ", params[i].dtype(), " for parameter ", i);
  Tensor orig_loss;
  detail::dispatch_floating("LBFGS.step", params[0].dtype(), [&]<typename T>() {
    using Vector = std::vector<T>;
    const Run<T> run(params, numel_, closure);
    const LBFGSOptions& o = options_;
    ParamState& state = mutable_state(0);  // the global state lives with the first parameter
    double func_evals = scalar_of(state, kFuncEvals, 0);
    double state_n_iter = scalar_of(state, kNIter, 0);
    const auto save_counts = [&] {
      state[kFuncEvals] = scalar_tensor(func_evals, kFloat64);
      state[kNIter] = scalar_tensor(state_n_iter, kFloat64);
    };

    // The loss and gradient where we stand.
    orig_loss = run.evaluate();
    double loss = orig_loss.template item<double>();
    int64_t current_evals = 1;
    func_evals += 1;
    Vector flat_grad = run.gather_flat_grad();
    bool opt_cond = Run<T>::max_abs(flat_grad) <= o.tolerance_grad;
    if (opt_cond) {
      save_counts();
      return;
    }

    // What the previous step left.
    const size_t n = static_cast<size_t>(numel_);
    Vector d, prev_flat_grad;
    bool has_prev_flat_grad = false;
    std::vector<Vector> old_dirs, old_stps;
    std::vector<double> ro;
    double t = scalar_of(state, kStepLength, 0);
    double H_diag = scalar_of(state, kHDiag, 1);
    double prev_loss = scalar_of(state, kPrevLoss, 0);
    if (state.count(kDirection)) d = to_vector_of<T>(state.at(kDirection));
    if (state.count(kPrevFlatGrad)) {
      prev_flat_grad = to_vector_of<T>(state.at(kPrevFlatGrad));
      has_prev_flat_grad = true;
    }
    if (state.count(kOldDirs)) {
      const Tensor& dirs = state.at(kOldDirs);
      const Tensor& stps = state.at(kOldStps);
      const Tensor& rhos = state.at(kRo);
      check(stps.shape() == dirs.shape() && rhos.numel() == dirs.size(0), kOp,
            "expected the state's old_dirs and old_stps of one shape [k, N] and ro of [k], got ", dirs.shape(), ", ",
            stps.shape(), " and ", rhos.shape());
      const T* dir_data = dirs.template data<T>();
      const T* stp_data = stps.template data<T>();
      for (int64_t k = 0; k < dirs.size(0); ++k) {
        old_dirs.emplace_back(dir_data + k * numel_, dir_data + (k + 1) * numel_);
        old_stps.emplace_back(stp_data + k * numel_, stp_data + (k + 1) * numel_);
        ro.push_back(static_cast<double>(rhos.template data<T>()[k]));
      }
    }
    if (state_n_iter >= 1)
      check(d.size() == n && has_prev_flat_grad && state.count(kOldDirs), kOp,
            "the state says ", state_n_iter, " iterations ran, but lacks their direction d, prev_flat_grad or history");

    std::vector<double> al(static_cast<size_t>(o.history_size));
    int64_t n_iter = 0;
    while (n_iter < o.max_iter) {
      ++n_iter;
      state_n_iter += 1;

      // The descent direction.
      if (state_n_iter == 1) {
        d.resize(n);
        for (size_t i = 0; i < n; ++i) d[i] = -flat_grad[i];
        old_dirs.clear();
        old_stps.clear();
        ro.clear();
        H_diag = 1;
      } else {
        // Update the memory with y = g - g_prev, s = t d.
        Vector y(n), s(n);
        for (size_t i = 0; i < n; ++i) y[i] = flat_grad[i] - prev_flat_grad[i];
        const T step = static_cast<T>(t);
        for (size_t i = 0; i < n; ++i) s[i] = d[i] * step;
        const double ys = Run<T>::dot(y, s);
        if (ys > 1e-10) {
          // Drop the oldest pairs so that at most history_size remain.
          while (old_dirs.size() >= static_cast<size_t>(o.history_size)) {
            old_dirs.erase(old_dirs.begin());
            old_stps.erase(old_stps.begin());
            ro.erase(ro.begin());
          }
          ro.push_back(static_cast<double>(static_cast<T>(1. / ys)));
          H_diag = static_cast<double>(static_cast<T>(ys / Run<T>::dot(y, y)));  // the initial Hessian's scale
          old_dirs.push_back(std::move(y));
          old_stps.push_back(std::move(s));
        }
        // The two-loop recursion: d = -H g with H the L-BFGS inverse Hessian, in one buffer q.
        const size_t num_old = old_dirs.size();
        Vector q(n);
        for (size_t i = 0; i < n; ++i) q[i] = -flat_grad[i];
        for (size_t k = num_old; k-- > 0;) {
          al[k] = static_cast<double>(static_cast<T>(Run<T>::dot(old_stps[k], q) * ro[k]));
          const T alpha = static_cast<T>(-al[k]);
          const Vector& dir = old_dirs[k];
          for (size_t i = 0; i < n; ++i) q[i] = q[i] + alpha * dir[i];
        }
        const T h = static_cast<T>(H_diag);
        for (size_t i = 0; i < n; ++i) q[i] = q[i] * h;  // r = d = q H_diag
        for (size_t k = 0; k < num_old; ++k) {
          const double be_i = static_cast<double>(static_cast<T>(Run<T>::dot(old_dirs[k], q) * ro[k]));
          const T alpha = static_cast<T>(al[k] - be_i);
          const Vector& stp = old_stps[k];
          for (size_t i = 0; i < n; ++i) q[i] = q[i] + alpha * stp[i];
        }
        d = std::move(q);
      }
      prev_flat_grad = flat_grad;
      has_prev_flat_grad = true;
      prev_loss = loss;

      // The step length's first guess.
      t = state_n_iter == 1 ? py_min(1., 1. / Run<T>::abs_sum(flat_grad)) * o.lr : o.lr;
      const double gtd = Run<T>::dot(flat_grad, d);  // the directional derivative g·d
      if (gtd > -o.tolerance_change) break;

      int64_t ls_func_evals = 0;
      if (o.line_search_fn) {
        const Vector x_init = run.clone_params();
        auto result = run.strong_wolfe(x_init, t, d, loss, flat_grad, gtd);
        loss = result.loss;
        flat_grad = std::move(result.flat_grad);
        t = result.t;
        ls_func_evals = result.func_evals;
        run.add_grad(t, d);
        opt_cond = Run<T>::max_abs(flat_grad) <= o.tolerance_grad;
      } else {
        run.add_grad(t, d);
        // No use evaluating after the last iteration: the next step() starts with an evaluation.
        if (n_iter != o.max_iter) {
          loss = run.evaluate().template item<double>();
          flat_grad = run.gather_flat_grad();
          opt_cond = Run<T>::max_abs(flat_grad) <= o.tolerance_grad;
          ls_func_evals = 1;
        }
      }
      current_evals += ls_func_evals;
      func_evals += static_cast<double>(ls_func_evals);

      // Stopping conditions.
      if (n_iter == o.max_iter) break;
      if (current_evals >= *o.max_eval) break;
      if (opt_cond) break;
      double max_change = 0;  // max |d t|: the step taken
      const T step = static_cast<T>(t);
      for (size_t i = 0; i < n; ++i) {
        const T change = std::abs(d[i] * step);
        max_change = change > max_change || std::isnan(change) ? change : max_change;
      }
      if (max_change <= o.tolerance_change) break;
      if (std::abs(loss - prev_loss) < o.tolerance_change) break;
    }

    save_counts();
    state[kDirection] = to_tensor(d, {numel_});
    state[kStepLength] = scalar_tensor(t, kFloat64);
    const int64_t k = static_cast<int64_t>(old_dirs.size());
    Tensor dirs = empty({k, numel_}, dtype_of<T>());
    Tensor stps = empty({k, numel_}, dtype_of<T>());
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(dirs.template mutable_data<T>() + j * numel_, old_dirs[static_cast<size_t>(j)].data(), n * sizeof(T));
      std::memcpy(stps.template mutable_data<T>() + j * numel_, old_stps[static_cast<size_t>(j)].data(), n * sizeof(T));
    }
    std::vector<T> rhos(ro.begin(), ro.end());
    state[kOldDirs] = dirs;
    state[kOldStps] = stps;
    state[kRo] = to_tensor(rhos, {k});
    state[kHDiag] = scalar_tensor(H_diag, dtype_of<T>());
    state[kPrevFlatGrad] = to_tensor(prev_flat_grad, {numel_});
    state[kPrevLoss] = scalar_tensor(prev_loss, kFloat64);
  });
  count_step();
  return orig_loss;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(kOp);
}

OptionValues LBFGS::group_options(size_t /*group*/) const {
  return {{"lr", options_.lr},
          {"max_iter", static_cast<double>(options_.max_iter)},
          {"max_eval", static_cast<double>(*options_.max_eval)},
          {"tolerance_grad", options_.tolerance_grad},
          {"tolerance_change", options_.tolerance_change},
          {"history_size", static_cast<double>(options_.history_size)},
          {"line_search_fn", options_.line_search_fn.value_or("")}};
}

namespace {

LBFGSOptions parse_lbfgs_options(const OptionValues& values) {
  options::check_keys(kOp, values,
                      {"lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size",
                       "line_search_fn"});
  const auto whole = [&](const char* key) {
    const double value = options::option_of<double>(kOp, values, key);
    check_whole(key, value, 1);
    return static_cast<int64_t>(value);
  };
  const std::string line_search = options::option_of<std::string>(kOp, values, "line_search_fn");
  return resolved({.lr = options::option_of<double>(kOp, values, "lr"),
                   .max_iter = whole("max_iter"),
                   .max_eval = whole("max_eval"),
                   .tolerance_grad = options::option_of<double>(kOp, values, "tolerance_grad"),
                   .tolerance_change = options::option_of<double>(kOp, values, "tolerance_change"),
                   .history_size = whole("history_size"),
                   .line_search_fn = line_search.empty() ? std::nullopt : std::optional(line_search)});
}

}  // namespace

void LBFGS::check_group_options(const OptionValues& options) const { parse_lbfgs_options(options); }

void LBFGS::set_group_options(size_t /*group*/, const OptionValues& options) {
  options_ = parse_lbfgs_options(options);
}

std::vector<std::string> LBFGS::state_names() const {
  return {kFuncEvals, kNIter, kDirection, kStepLength, kOldDirs, kOldStps, kRo, kHDiag, kPrevFlatGrad, kPrevLoss};
}

bool LBFGS::keeps_float64(const std::string& name) const {
  return name == kFuncEvals || name == kNIter || name == kStepLength || name == kPrevLoss;
}

void LBFGS::check_state_tensor(const Tensor& /*param*/, int64_t index, const std::string& name,
                               const Tensor& tensor) const {
  check(tensor.defined(), kOp, "load_state_dict: the '", name, "' of parameter index ", index, " is undefined");
  check(tensor.dtype() == kFloat32 || tensor.dtype() == kFloat64, kOp, "load_state_dict: expected the '", name,
        "' of parameter index ", index, " to be floating point, got ", tensor.dtype());
  const Shape& shape = tensor.shape();
  if (name == kDirection || name == kPrevFlatGrad) {
    check(shape == Shape{numel_}, kOp, "load_state_dict: expected '", name, "' of shape [", numel_,
          "] (all parameters' elements), got ", shape);
  } else if (name == kOldDirs || name == kOldStps) {
    check(shape.size() == 2 && shape[1] == numel_, kOp, "load_state_dict: expected '", name, "' of shape [k, ",
          numel_, "], got ", shape);
  } else if (name == kRo) {
    check(shape.size() == 1, kOp, "load_state_dict: expected 'ro' of shape [k], got ", shape);
  } else {
    check(shape.empty(), kOp, "load_state_dict: expected '", name, "' to be 0-d, got ", shape);
    if (name == kFuncEvals || name == kNIter) check_whole(name.c_str(), tensor.to(kFloat64).item<double>(), 0);
  }
}

}  // namespace tg::optim
