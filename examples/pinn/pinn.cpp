// pinn — a physics-informed neural network: an MLP u(x) learns the solution of the Poisson problem
//
//   -u''(x) = π² sin(πx) on [-1, 1],   u(-1) = u(1) = 0        (exact solution u = sin(πx))
//
// from the equation alone, without ever seeing a value of the solution: the loss is the mean
// squared residual u'' + π² sin(πx) at N collocation points plus the mean squared boundary values.
// u' and u'' come from tg::autograd::grad with create_graph, so that the loss's gradient with
// respect to the weights (a third derivative through the network) can be taken by backward().
//
//   ./build/examples/pinn                 # Adam warm-up, then L-BFGS with a strong-Wolfe line search
//   ./build/examples/pinn --threads 2 --hidden 32 --lbfgs-iters 300
//   ./build/examples/pinn --help          # every flag and its default
//
// bench/pinn_torch.py is its PyTorch twin (the same initialisation, points, loss and iterations).
// Its last line is "relative L2 error X", u against sin(πx) on 10001 points; it exits with status 1
// when X > --target-error, 2 on a wrong flag or value or an error.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <tapegrad/tapegrad.hpp>
#include <vector>

#include "../flags.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

constexpr double kPi = std::numbers::pi;

// splitmix64: a tiny generator the Python twin reproduces bit for bit, so both start from the same
// weights.
uint64_t splitmix64(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ULL;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The network's parameters, weight then bias per layer: Linear(1, H), (Linear(H, H)) x (depth - 1),
// Linear(H, 1). Weights Xavier-uniform (the usual choice under tanh), biases 0.
std::vector<tg::Tensor> make_params(int64_t hidden, int64_t depth, uint64_t seed, tg::DType dtype) {
  std::vector<int64_t> sizes{1};
  for (int64_t k = 0; k < depth; ++k) sizes.push_back(hidden);
  sizes.push_back(1);
  uint64_t state = seed;
  std::vector<tg::Tensor> params;
  for (size_t k = 0; k + 1 < sizes.size(); ++k) {
    const int64_t fan_in = sizes[k], fan_out = sizes[k + 1];
    const double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    std::vector<double> values;
    for (int64_t i = 0; i < fan_out * fan_in; ++i) {
      const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1p-53;  // uniform in [0, 1)
      values.push_back((2.0 * u - 1.0) * bound);
    }
    params.push_back(tg::tensor(values, {fan_out, fan_in}, dtype).requires_grad_());  // weight: [out, in]
    params.push_back(tg::zeros({fan_out}, dtype).requires_grad_());                   // bias: [out]
  }
  return params;
}

// u(x): x [n, 1] -> [n, 1], tanh after every layer but the last.
tg::Tensor net(const std::vector<tg::Tensor>& params, const tg::Tensor& x) {
  namespace F = tg::nn::functional;
  tg::Tensor h = x;
  for (size_t k = 0; k + 2 < params.size(); k += 2) h = F::linear(h, params[k], params[k + 1]).tanh();
  return F::linear(h, params[params.size() - 2], params.back());
}

// A column [n, 1] of f(t_i) for the given points.
tg::Tensor column(const std::vector<double>& points, double (*f)(double), tg::DType dtype) {
  std::vector<double> values;
  for (double t : points) values.push_back(f(t));
  return tg::tensor(values, {static_cast<int64_t>(points.size()), 1}, dtype);
}

double identity(double t) { return t; }
double forcing(double t) { return kPi * kPi * std::sin(kPi * t); }  // f = -u'' for u = sin(πx)
double exact(double t) { return std::sin(kPi * t); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app("pinn: an MLP learns the solution of -u'' = pi^2 sin(pi x), u(-1) = u(1) = 0", "pinn");
  int64_t threads = 0, seed = 0, hidden = 20, depth = 2, points = 64, adam_steps = 200, lbfgs_steps = 1,
          lbfgs_iters = 150, history = 50;
  double adam_lr = 1e-3, target_error = 1e-3;
  bool float32 = false;
  app.add_option("--threads", threads, "threads; 0: all cores")->check(examples::non_negative);
  app.add_option("--seed", seed, "seed of the initial weights (splitmix64)")->check(examples::non_negative);
  app.add_option("--hidden", hidden, "width of the hidden layers")->check(examples::positive);
  app.add_option("--depth", depth, "hidden layers")->check(examples::positive);
  app.add_option("--points", points, "interior collocation points")->check(examples::positive);
  app.add_option("--adam-steps", adam_steps, "Adam steps of the warm-up")->check(examples::non_negative);
  app.add_option("--adam-lr", adam_lr, "Adam's learning rate")->check(examples::positive);
  app.add_option("--lbfgs-steps", lbfgs_steps, "L-BFGS steps (calls of step(closure))")->check(examples::non_negative);
  app.add_option("--lbfgs-iters", lbfgs_iters, "L-BFGS iterations per step (max_iter)")->check(examples::positive);
  app.add_option("--history", history, "L-BFGS history_size")->check(examples::positive);
  app.add_option("--target-error", target_error, "exit 1 above this relative L2 error")->check(examples::positive);
  app.add_flag("--float32", float32, "train in float32 instead of float64");
  if (const std::optional<int> status = examples::parse(app, argc, argv)) return *status;
  if (threads > 0) tg::set_num_threads(static_cast<int>(threads));
#if defined(__GLIBC__)
  // Each evaluation builds and frees a graph of a few hundred small tensors: with glibc's default
  // 128 KiB trim threshold, every free of the graph hands the top of the heap back to the kernel and
  // the next evaluation faults the same pages in again (half the L-BFGS phase's time). Keep them.
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  const tg::DType dtype = float32 ? tg::kFloat32 : tg::kFloat64;

  const std::vector<tg::Tensor> params = make_params(hidden, depth, static_cast<uint64_t>(seed), dtype);
  // Collocation points: the midpoints of N equal cells of [-1, 1]; x requires grad so that u can be
  // differentiated with respect to it.
  std::vector<double> interior;
  for (int64_t i = 0; i < points; ++i) interior.push_back(-1 + 2 * (static_cast<double>(i) + 0.5) / static_cast<double>(points));
  const tg::Tensor x = column(interior, identity, dtype).requires_grad_();
  const tg::Tensor f = column(interior, forcing, dtype);
  const tg::Tensor boundary = column({-1.0, 1.0}, identity, dtype);

  // loss = mean((u'' + f)²) + mean(u(±1)²). The grad_outputs are ones: u_i depends on x_i only, so
  // the vector-Jacobian product with ones is the column of derivatives u'(x_i).
  const auto loss_fn = [&] {
    const tg::Tensor u = net(params, x);
    const tg::Tensor ones = tg::ones_like(u);
    const tg::Tensor u_x = tg::autograd::grad({u}, {x}, {ones}, {.create_graph = true})[0];
    const tg::Tensor u_xx = tg::autograd::grad({u_x}, {x}, {ones}, {.create_graph = true})[0];
    const tg::Tensor residual = u_xx + f;
    return (residual * residual).mean() + net(params, boundary).pow(2).mean();
  };

  const auto start = std::chrono::steady_clock::now();
  tg::optim::Adam adam(params, {.lr = adam_lr});
  for (int64_t step = 1; step <= adam_steps; ++step) {
    adam.zero_grad();
    const tg::Tensor loss = loss_fn();
    loss.backward();
    adam.step();
    if (step % 250 == 0 || step == adam_steps) std::printf("adam step %lld loss %.6e\n", static_cast<long long>(step), loss.item());
  }
  const double adam_seconds = seconds_since(start);

  // Tolerances 0: every iteration runs, as in the twin, so that both do the same work.
  tg::optim::LBFGS lbfgs(params, {.lr = 1,
                                  .max_iter = lbfgs_iters,
                                  .tolerance_grad = 0,
                                  .tolerance_change = 0,
                                  .history_size = history,
                                  .line_search_fn = "strong_wolfe"});
  const auto closure = [&] {
    lbfgs.zero_grad();
    tg::Tensor loss = loss_fn();
    loss.backward();
    return loss;
  };
  for (int64_t step = 1; step <= lbfgs_steps; ++step) {
    lbfgs.step(closure);
    const tg::optim::ParamState& state = lbfgs.state(0);
    std::printf("lbfgs step %lld loss %.6e iterations %.0f evaluations %.0f\n", static_cast<long long>(step),
                closure().item(), state.at("n_iter").item(), state.at("func_evals").item());
  }
  const double total_seconds = seconds_since(start);

  // The error against sin(πx) on a fine grid, in float64.
  double error = 0;
  {
    tg::NoGradGuard no_grad;
    std::vector<double> grid;
    for (int i = 0; i <= 10000; ++i) grid.push_back(-1 + 2 * i / 10000.0);
    std::vector<tg::Tensor> params64;
    for (const tg::Tensor& p : params) params64.push_back(p.detach().to(tg::kFloat64));
    const tg::Tensor u = net(params64, column(grid, identity, tg::kFloat64));
    const tg::Tensor u_exact = column(grid, exact, tg::kFloat64);
    error = std::sqrt((u - u_exact).pow(2).sum().item() / u_exact.pow(2).sum().item());
  }
  std::printf("time %.3f s (adam %.3f s, lbfgs %.3f s), %d threads, %s\n", total_seconds, adam_seconds,
              total_seconds - adam_seconds, tg::get_num_threads(), float32 ? "float32" : "float64");
  std::printf("relative L2 error %.3e\n", error);
  return error <= target_error ? 0 : 1;
} catch (const std::exception& error) {
  std::fprintf(stderr, "pinn: %s\n", error.what());
  return 2;
}
