// learn_affine — a student LayerNorm learns a teacher's hidden γ*, β* from examples.
//
// The teacher is LayerNorm({E}) with γ* evenly spaced in [0.5, 2] and β* in [−1, 1]; it maps
// random inputs [B, S, E] to targets. The student starts at γ = 1, β = 0 (PyTorch's init) and
// fits the targets with SGD on the mean squared error. Both normalise the same inputs the same
// way, so only γ and β differ and the student can recover them exactly.
//
//   ./build/examples/learn_affine --steps 300 --embed 16
//
// Exits with status 1 unless max|γ − γ*| and max|β − β*| both end below --tolerance.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <tapegrad/tapegrad.hpp>

#include "cli.hpp"

namespace {

// n values evenly spaced from first to last (torch.linspace).
tg::Tensor linspace(double first, double last, int64_t n) {
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = n == 1 ? first : first + (last - first) * i / static_cast<double>(n - 1);
  return tg::tensor(values);
}

double max_abs_difference(const tg::Tensor& a, const tg::Tensor& b) {
  tg::NoGradGuard no_grad;
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv);
  const long steps = flags.integer("steps", 300);
  const long seed = flags.integer("seed", 0);
  const long threads = flags.integer("threads", 0);  // 0: all cores
  const long batch = flags.integer("batch", 32);
  const long seq = flags.integer("seq", 8);
  const long embed = flags.integer("embed", 16);
  const double lr = flags.real("lr", 1.0);
  const double tolerance = flags.real("tolerance", 1e-3);
  if (flags.finish("learn_affine")) return 0;
  if (threads > 0) tg::set_num_threads(static_cast<int>(threads));
  tg::manual_seed(static_cast<uint64_t>(seed));

  tg::nn::LayerNorm teacher({embed});
  teacher.weight = linspace(0.5, 2.0, embed);  // γ*
  teacher.bias = linspace(-1.0, 1.0, embed);   // β*
  tg::nn::LayerNorm student({embed});
  // The gradient of the mean over B·S·E squared errors with respect to one γ_j is about
  // 2(γ_j − γ*_j)/E, so lr ≈ 1 with momentum contracts the error by a constant factor a step.
  tg::optim::SGD optimizer(student.parameters(), {.lr = lr, .momentum = 0.9});

  spdlog::info("learn_affine: E = {}, batches of [{}, {}, {}], {} steps, {} threads", embed, batch, seq, embed, steps,
               tg::get_num_threads());
  for (long step = 1; step <= steps; ++step) {
    const tg::Tensor x = tg::randn({batch, seq, embed});
    tg::Tensor target;
    {
      tg::NoGradGuard no_grad;
      target = teacher(x);
    }
    optimizer.zero_grad();
    tg::Tensor loss = tg::nn::mse_loss(student(x), target);
    loss.backward();
    optimizer.step();
    if (step == 1 || step % 50 == 0 || step == steps)
      spdlog::info("step {:4d}  loss {:.3e}  max|γ−γ*| {:.3e}  max|β−β*| {:.3e}", step, loss.item(),
                   max_abs_difference(student.weight, teacher.weight), max_abs_difference(student.bias, teacher.bias));
  }

  const double gamma_error = max_abs_difference(student.weight, teacher.weight);
  const double beta_error = max_abs_difference(student.bias, teacher.bias);
  spdlog::info("final max|gamma - gamma*| = {:.3e}, max|beta - beta*| = {:.3e} (tolerance {:.1e})", gamma_error,
               beta_error, tolerance);
  if (!(gamma_error < tolerance && beta_error < tolerance)) {
    spdlog::error("the student did not recover the teacher's gamma and beta");
    return 1;
  }
  return 0;
} catch (const std::exception& error) {
  spdlog::error("learn_affine: {}", error.what());
  return 2;
}
