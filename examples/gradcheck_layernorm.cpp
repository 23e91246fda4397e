// gradcheck_layernorm — checks tapegrad's fused LayerNorm backward against finite differences.
//
// For each case, tg::gradcheck perturbs every element of x, γ and β by ±eps in float64 and
// compares the numeric Jacobian with the analytic one from LayerNorm's closed-form backward.
//
//   ./build/examples/gradcheck_layernorm --steps 3    # three random draws per case
//   ./build/examples/gradcheck_layernorm --help       # every flag and its default
//
// Prints one table row per case and draw; exits with status 0 only when every row passes (1 when
// one fails, 2 on a wrong flag or value).
#include <spdlog/spdlog.h>

#include <string>
#include <tapegrad/tapegrad.hpp>

#include "flags.hpp"

namespace {

struct Case {
  std::string name;
  tg::Shape input_shape;
  tg::Shape normalized_shape;
  bool affine;
};

std::string shape_text(const tg::Shape& shape) { return tg::to_string(shape); }

std::string error_text(const tg::GradcheckResult& result, size_t input) {
  if (input >= result.max_abs_error.size()) return "-";
  return fmt::format("{:.2e}", result.max_abs_error[input]);
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app("gradcheck_layernorm: LayerNorm's backward against finite differences, in float64", "gradcheck_layernorm");
  int64_t draws = 1, seed = 0, threads = 0;
  double eps = 1e-6;
  app.add_option("--steps", draws, "random draws of x, gamma and beta per case")->check(examples::positive);
  app.add_option("--seed", seed, "seed of the draws")->check(examples::non_negative);
  app.add_option("--threads", threads, "threads; 0: all cores")->check(examples::non_negative);
  app.add_option("--eps", eps, "finite-difference step")->check(examples::positive);
  if (const std::optional<int> status = examples::parse(app, argc, argv)) return *status;
  if (threads > 0) tg::set_num_threads(static_cast<int>(threads));
  tg::manual_seed(static_cast<uint64_t>(seed));

  const std::vector<Case> cases = {
      {"2-D", {4, 6}, {6}, true},
      {"3-D [B,S,E]", {2, 3, 5}, {5}, true},
      {"two normalised dims", {2, 3, 4}, {3, 4}, true},
      {"no affine", {3, 4}, {4}, false},
      {"E = 1", {3, 1}, {1}, true},
  };
  namespace F = tg::nn::functional;

  fmt::print("{:<22} {:<12} {:<8} {:>10} {:>10} {:>10}  {}\n", "case", "x", "norm", "dx err", "dγ err", "dβ err",
             "result");
  bool all_passed = true;
  for (const Case& c : cases) {
    for (int64_t draw = 0; draw < draws; ++draw) {
      std::vector<tg::Tensor> inputs = {tg::randn(c.input_shape, tg::kFloat64).requires_grad_()};
      if (c.affine) {
        // Non-trivial γ and β: with γ = 1, β = 0 a wrong dγ or dβ could hide.
        inputs.push_back((tg::randn(c.normalized_shape, tg::kFloat64) * 0.5 + 1.0).detach().requires_grad_());
        inputs.push_back(tg::randn(c.normalized_shape, tg::kFloat64).requires_grad_());
      }
      const tg::Shape normalized_shape = c.normalized_shape;
      const auto layer_norm = [normalized_shape](const std::vector<tg::Tensor>& in) {
        return in.size() == 3 ? F::layer_norm(in[0], normalized_shape, in[1], in[2], 1e-5)
                              : F::layer_norm(in[0], normalized_shape, {}, {}, 1e-5);
      };
      const tg::GradcheckResult result = tg::gradcheck(layer_norm, inputs, {.eps = eps});
      all_passed &= static_cast<bool>(result);
      fmt::print("{:<22} {:<12} {:<8} {:>10} {:>10} {:>10}  {}\n", c.name, shape_text(c.input_shape),
                 shape_text(c.normalized_shape), error_text(result, 0), c.affine ? error_text(result, 1) : "-",
                 c.affine ? error_text(result, 2) : "-", result ? "pass" : "FAIL");
      if (!result) spdlog::error("{}", result.message);
    }
  }
  if (!all_passed) {
    spdlog::error("gradcheck_layernorm: some cases failed");
    return 1;
  }
  spdlog::info("gradcheck_layernorm: all cases pass");
  return 0;
} catch (const std::exception& error) {
  spdlog::error("gradcheck_layernorm: {}", error.what());
  return 2;
}
