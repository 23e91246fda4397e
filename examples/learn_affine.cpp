// learn_affine — a student LayerNorm learns a teacher's hidden γ*, β* from examples.
//
// The teacher is LayerNorm({E}) with γ* evenly spaced in [0.5, 2] and β* in [−1, 1]; it maps
// random inputs [B, S, E] to targets. The student starts at γ = 1, β = 0 (PyTorch's init) and
// fits the targets with SGD on the mean squared error, in shuffled mini-batches of a fixed set of
// --samples examples (a DataLoader over a TensorDataset). Both normalise the same inputs the same
// way, so only γ and β differ and the student can recover them exactly.
//
//   ./build/examples/learn_affine --steps 300 --embed 16
//   ./build/examples/learn_affine --help      # every flag and its default
//
// Exits with status 1 unless max|γ − γ*| and max|β − β*| both end below --tolerance, 2 on a
// wrong flag or value.
#include <spdlog/spdlog.h>

#include <tapegrad/tapegrad.hpp>

#include "flags.hpp"

namespace {

// n values evenly spaced from first to last (torch.linspace).
tg::Tensor linspace(double first, double last, int64_t n) {
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = n == 1 ? first : first + (last - first) * i / static_cast<double>(n - 1);
  return tg::tensor(values);
}

double max_abs_difference(const tg::Tensor& a, const tg::Tensor& b) {
  tg::NoGradGuard no_grad;
  return (a - b).abs().max().item();
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app("learn_affine: a student LayerNorm learns a teacher's hidden gamma and beta", "learn_affine");
  int64_t steps = 300, seed = 0, threads = 0, batch = 32, seq = 8, embed = 16, samples = 1024;
  double lr = 1.0, tolerance = 1e-3;
  app.add_option("--steps", steps, "optimizer steps (mini-batches)")->check(examples::positive);
  app.add_option("--seed", seed, "seed of the inputs and the shuffle")->check(examples::non_negative);
  app.add_option("--threads", threads, "threads; 0: all cores")->check(examples::non_negative);
  app.add_option("--batch", batch, "B: sequences per mini-batch")->check(examples::positive);
  app.add_option("--seq", seq, "S: positions per sequence")->check(examples::positive);
  app.add_option("--embed", embed, "E: features per position, normalised together")->check(examples::positive);
  app.add_option("--samples", samples, "sequences in the training set")->check(examples::positive);
  app.add_option("--lr", lr, "learning rate")->check(examples::positive);
  app.add_option("--tolerance", tolerance, "exit 1 unless both errors end below this")->check(examples::positive);
  if (const std::optional<int> status = examples::parse(app, argc, argv)) return *status;
  if (threads > 0) tg::set_num_threads(static_cast<int>(threads));
  tg::manual_seed(static_cast<uint64_t>(seed));

  tg::nn::LayerNorm teacher({embed});
  teacher.weight = linspace(0.5, 2.0, embed);  // γ*
  teacher.bias = linspace(-1.0, 1.0, embed);   // β*
  tg::nn::LayerNorm student({embed});
  // The gradient of the mean over B·S·E squared errors with respect to one γ_j is about
  // 2(γ_j − γ*_j)/E, so lr ≈ 1 with momentum contracts the error by a constant factor a step.
  tg::optim::SGD optimizer(student.parameters(), {.lr = lr, .momentum = 0.9});

  // inputs: [samples, S, E]; targets: the teacher's outputs for them, the same shape.
  const tg::Tensor inputs = tg::randn({samples, seq, embed});
  tg::Tensor targets;
  {
    tg::NoGradGuard no_grad;
    targets = teacher(inputs);
  }
  tg::Generator shuffle_generator(static_cast<uint64_t>(seed));
  const tg::data::DataLoader loader(tg::data::TensorDataset(inputs, targets),
                                    {.batch_size = batch, .shuffle = true, .generator = &shuffle_generator});

  spdlog::info("learn_affine: E = {}, {} samples in batches of [{}, {}, {}], {} steps, {} threads", embed, samples,
               batch, seq, embed, steps, tg::get_num_threads());
  int64_t step = 0;
  while (step < steps) {
    for (const tg::data::Example& example : loader) {
      if (step == steps) break;
      optimizer.zero_grad();
      tg::Tensor loss = tg::nn::mse_loss(student(example.data), example.target);
      loss.backward();
      optimizer.step();
      ++step;
      if (step == 1 || step % 50 == 0 || step == steps)
        spdlog::info("step {:4d}  loss {:.3e}  max|γ−γ*| {:.3e}  max|β−β*| {:.3e}", step, loss.item(),
                     max_abs_difference(student.weight, teacher.weight), max_abs_difference(student.bias, teacher.bias));
    }
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
