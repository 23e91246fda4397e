// SiLU, LeakyReLU, ELU, Softplus, Hardswish, Mish and Unflatten: the functional forms and the modules
// against PyTorch (tests/fixtures/make_activation_fixtures.py: values, first and second derivatives,
// kinks, thresholds and large |x| included), gradcheck, values derived by hand, determinism across
// thread counts and vector levels, errors, and a LeakyReLU critic's WGAN-GP gradient penalty.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "support/vector_isa_levels.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

// One fixture case: its functional form and the module that computes the same.
struct ActivationCase {
  std::string name;  // the fixture's case, without the dtype suffix
  std::function<Tensor(const Tensor&)> functional;
  std::function<std::shared_ptr<tg::nn::Module>()> module;
};

const std::vector<ActivationCase>& activation_cases() {
  using namespace tg::nn;
  static const std::vector<ActivationCase> cases{
      {"silu", [](const Tensor& x) { return F::silu(x); }, [] { return std::make_shared<SiLU>(); }},
      {"mish", [](const Tensor& x) { return F::mish(x); }, [] { return std::make_shared<Mish>(); }},
      {"hardswish", [](const Tensor& x) { return F::hardswish(x); }, [] { return std::make_shared<Hardswish>(); }},
      {"leaky_relu", [](const Tensor& x) { return F::leaky_relu(x); }, [] { return std::make_shared<LeakyReLU>(); }},
      {"leaky_relu_slope0p2", [](const Tensor& x) { return F::leaky_relu(x, 0.2); },
       [] { return std::make_shared<LeakyReLU>(LeakyReLUOptions{.negative_slope = 0.2}); }},
      {"elu", [](const Tensor& x) { return F::elu(x); }, [] { return std::make_shared<ELU>(); }},
      {"elu_alpha0p5", [](const Tensor& x) { return F::elu(x, 0.5); },
       [] { return std::make_shared<ELU>(ELUOptions{.alpha = 0.5}); }},
      {"softplus", [](const Tensor& x) { return F::softplus(x); }, [] { return std::make_shared<Softplus>(); }},
      {"softplus_beta2_threshold5", [](const Tensor& x) { return F::softplus(x, 2.0, 5.0); },
       [] { return std::make_shared<Softplus>(SoftplusOptions{.beta = 2.0, .threshold = 5.0}); }},
      {"softplus_beta0p5_threshold3", [](const Tensor& x) { return F::softplus(x, 0.5, 3.0); },
       [] { return std::make_shared<Softplus>(SoftplusOptions{.beta = 0.5, .threshold = 3.0}); }},
  };
  return cases;
}

const ActivationCase& activation_case(const std::string& name) {
  for (const ActivationCase& c : activation_cases())
    if (c.name == name) return c;
  FAIL("no activation case " << name);
  throw;  // unreachable: FAIL throws
}

// PyTorch's OpInfo tolerances (torch.testing's defaults): float32 atol 1e-5, rtol 1.3e-6. float64
// at 1e-12 (absolute and relative): the same formulas, rounded differently.
void require_close_opinfo(const Tensor& actual, const Tensor& expected, tg::DType dtype) {
  const double atol = dtype == tg::kFloat32 ? 1e-5 : 1e-12, rtol = dtype == tg::kFloat32 ? 1.3e-6 : 1e-12;
  INFO("actual:   " << actual << "\nexpected: " << expected
                    << "\nmax |diff| = " << tg::testing::max_abs_diff(actual, expected));
  REQUIRE(tg::testing::allclose(actual, expected, atol, rtol));
}

const std::vector<std::string> kNames{"silu",      "mish", "hardswish", "leaky_relu", "leaky_relu_slope0p2",
                                      "elu",       "elu_alpha0p5",     "softplus",   "softplus_beta2_threshold5",
                                      "softplus_beta0p5_threshold3"};

}  // namespace

TEST_CASE("SiLU, Mish, Hardswish, LeakyReLU, ELU and Softplus match PyTorch, kinks and large |x| included",
          "[activation][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const std::string name = GENERATE_REF(from_range(kNames));
  const bool use_module = GENERATE(false, true);
  INFO(name << suffix << (use_module ? " module" : " functional"));
  const tg::testing::FixtureCase& c = tg::testing::fixture("activation.txt", name + suffix);
  const ActivationCase& activation = activation_case(name);
  const std::shared_ptr<tg::nn::Module> module = activation.module();
  REQUIRE(module->parameters().empty());
  const auto f = [&](const Tensor& x) { return use_module ? (*module)(x) : activation.functional(x); };
  const tg::DType dtype = fixture_dtype(suffix);

  Tensor x = leaf(c.at("x"));
  Tensor y = f(x);
  require_close_opinfo(y, c.at("y"), dtype);
  y.backward(c.at("dy"));
  require_close_opinfo(x.grad(), c.at("dx"), dtype);

  if (dtype == tg::kFloat64) {
    // The second derivative, from a recorded backward: dy · v · f''(x), PyTorch's double backward.
    Tensor x2 = leaf(c.at("x"));
    const Tensor dx = tg::autograd::grad({f(x2)}, {x2}, {c.at("dy")}, {.create_graph = true})[0];
    require_close_opinfo(dx, c.at("dx"), dtype);
    // A derivative that is piecewise constant (leaky_relu's) leaves dx unconnected to x: f'' = 0.
    const Tensor ddx = dx.requires_grad() ? tg::autograd::grad({dx}, {x2}, {c.at("v")})[0] : tg::zeros_like(dx);
    // PyTorch's silu and mish double backward overflow to NaN at x = 1000 (e^x through σ'); the
    // second derivative there is 0 to far below a double, which is what we give.
    const std::vector<double> xs = tg::testing::values(c.at("x")), expected = tg::testing::values(c.at("ddx"));
    std::vector<double> reference = expected;
    for (size_t i = 0; i < reference.size(); ++i) {
      if (!std::isnan(expected[i])) continue;
      INFO("PyTorch's NaN at x = " << xs[i]);
      REQUIRE(std::fabs(xs[i]) >= 1000.0);
      reference[i] = 0.0;
    }
    require_close_opinfo(ddx, tg::tensor(reference, {static_cast<int64_t>(reference.size())}, tg::kFloat64), dtype);
  }
}

TEST_CASE("the CNN activations treat NaN, ±inf and ±0 as PyTorch does", "[activation][fixture]") {
  const std::string name = GENERATE_REF(from_range(kNames));
  INFO(name);
  const tg::testing::FixtureCase& c = tg::testing::fixture("activation.txt", "nonfinite_" + name);
  Tensor x = leaf(c.at("x"));
  Tensor y = activation_case(name).functional(x);
  tg::testing::require_ieee_equal(y, tg::testing::values(c.at("y")), 1e-7);
  y.backward(tg::ones_like(y));
  tg::testing::require_ieee_equal(x.grad(), tg::testing::values(c.at("dx")), 1e-7);
  // an empty tensor is an empty result, with an empty gradient
  Tensor empty = tg::ones({0, 3}).requires_grad_();
  Tensor out = activation_case(name).functional(empty);
  CHECK(out.shape() == Shape{0, 3});
  out.sum().backward();
  CHECK(empty.grad().shape() == Shape{0, 3});
}

TEST_CASE("the CNN activations at hand-derived points", "[activation]") {
  const Tensor x = tg::tensor(std::vector<double>{-4.0, -3.0, -1.0, 0.0, 1.0, 3.0, 4.0}, {7}, tg::kFloat64);
  const auto at = [&](const Tensor& y) { return y.to_vector<double>(); };
  CHECK(at(F::leaky_relu(x, 0.5)) == std::vector<double>{-2.0, -1.5, -0.5, 0.0, 1.0, 3.0, 4.0});
  // hardswish: 0 below −3, x (x + 3)/6 between, x above
  CHECK(at(F::hardswish(x)) == std::vector<double>{-0.0, -0.0, -1.0 / 3.0, 0.0, 2.0 / 3.0, 3.0, 4.0});
  const std::vector<double> elu = at(F::elu(x, 2.0));
  CHECK(elu[2] == Approx(2.0 * (std::exp(-1.0) - 1.0)).epsilon(1e-15));
  CHECK(elu[3] == 0.0);
  CHECK(elu[5] == 3.0);
  CHECK(at(F::softplus(x))[3] == Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(at(F::softplus(x, 2.0, 1.0))[4] == 1.0);  // βx = 2 > threshold 1: x itself
  CHECK(at(F::silu(x))[4] == Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-15));
  CHECK(at(F::mish(x))[4] == Approx(std::tanh(std::log(1.0 + std::exp(1.0)))).epsilon(1e-15));

  // The gradients at the kinks, derivatives.yaml's conventions.
  const auto grad_at = [](double point, const std::function<Tensor(const Tensor&)>& f) {
    Tensor p = tg::scalar_tensor(point, tg::kFloat64).requires_grad_();
    f(p).backward();
    return p.grad().item<double>();
  };
  CHECK(grad_at(0.0, [](const Tensor& v) { return F::leaky_relu(v, 0.3); }) == 0.3);
  CHECK(grad_at(0.0, [](const Tensor& v) { return F::elu(v, 0.7); }) == 0.7);
  CHECK(grad_at(-3.0, [](const Tensor& v) { return F::hardswish(v); }) == -0.5);
  CHECK(grad_at(3.0, [](const Tensor& v) { return F::hardswish(v); }) == 1.0);
  CHECK(grad_at(2.999, [](const Tensor& v) { return F::hardswish(v); }) == Approx(2.999 / 3 + 0.5).epsilon(1e-15));
  CHECK(grad_at(-3.5, [](const Tensor& v) { return F::hardswish(v); }) == 0.0);
  CHECK(grad_at(3.5, [](const Tensor& v) { return F::hardswish(v); }) == 1.0);
  CHECK(grad_at(20.0, [](const Tensor& v) { return F::softplus(v); }) == Approx(1.0 / (1.0 + std::exp(-20.0))));
  CHECK(grad_at(20.5, [](const Tensor& v) { return F::softplus(v); }) == 1.0);
}

// float32 SiLU, ELU, Softplus and Mish run their own vectorised formulas (nn/src/activation_kernels.cpp:
// one exp_float, ELU's expm1 polynomial, Softplus's log1p on [0, 1]); float64 runs the C library's.
// On a dense grid (steps of 2^−10 over [−40, 40], both sides of expm1's switch at |x| = 0.35, of
// mish's saturation at 20 and of every softplus threshold, and ±2^−k down to 1e−30) the float32
// results stay within 6 ulp of the float64 ones at the same inputs (measured: at most 4), the
// gradients within 6 ulp plus 2^−22 absolute, for the cancellation of silu's and mish's derivative
// near their minima, which is the formula's (PyTorch's too). PyTorch's float32 OpInfo tolerance is
// atol 1e−5, rtol 1.3e−6: these bounds are far inside it.
TEST_CASE("the float32 CNN activations stay within a few ulp of the float64 ones", "[activation][accuracy]") {
  std::vector<double> grid;
  for (int i = -40 * 1024; i <= 40 * 1024; ++i) grid.push_back(std::ldexp(i, -10));
  for (double v = 1e-30; v < 1; v *= 1.7) {
    grid.push_back(static_cast<float>(v));
    grid.push_back(-static_cast<float>(v));
  }
  const int64_t n = static_cast<int64_t>(grid.size());
  const auto ulp = [](double v) {
    int exponent = 0;
    std::frexp(v, &exponent);
    return std::ldexp(1.0, std::max(exponent - 24, -149));
  };
  for (const std::string name : {"silu", "elu", "elu_alpha0p5", "softplus", "softplus_beta2_threshold5",
                                 "softplus_beta0p5_threshold3", "mish"}) {
    INFO(name);
    const ActivationCase& activation = activation_case(name);
    const auto run = [&](tg::DType dtype) {
      Tensor x = tg::tensor(grid, {n}, tg::kFloat64).to(dtype).requires_grad_();
      Tensor y = activation.functional(x);
      y.sum().backward();
      return std::pair{tg::testing::values(y), tg::testing::values(x.grad())};
    };
    const auto [y32, dx32] = run(tg::kFloat32);
    const auto [y64, dx64] = run(tg::kFloat64);
    for (int64_t i = 0; i < n; ++i) {
      INFO("x = " << grid[i] << ": y " << y32[i] << " vs " << y64[i] << ", dx " << dx32[i] << " vs " << dx64[i]);
      REQUIRE(std::fabs(y32[i] - y64[i]) <= 6 * ulp(y64[i]));
      REQUIRE(std::fabs(dx32[i] - dx64[i]) <= 6 * ulp(dx64[i]) + 0x1p-22);
    }
  }
}

TEST_CASE("the CNN activations pass gradcheck and gradgradcheck in float64", "[activation][gradcheck]") {
  const std::string name = GENERATE_REF(from_range(kNames));
  INFO(name);
  const ActivationCase& activation = activation_case(name);
  // Away from the kinks (0, ±3) by more than gradcheck's step, and across every branch.
  tg::manual_seed(31);
  Tensor x = (tg::rand({4, 6}, tg::kFloat64) * 10.0 - 5.0).detach();
  x = tg::where(x.abs() < 0.05, x + 0.1, x);
  x = tg::where((x.abs() - 3.0).abs() < 0.05, x + 0.1, x).requires_grad_();
  const auto f = [&](const std::vector<Tensor>& in) { return activation.functional(in[0]); };
  TG_REQUIRE_GRADCHECK(f, std::vector<Tensor>{x});
  const tg::GradcheckResult second = tg::gradgradcheck(f, std::vector<Tensor>{x});
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("the CNN activations record one node each", "[activation]") {
  const Tensor x = tg::randn({3}).requires_grad_();
  CHECK(std::string(F::silu(x).grad_fn_name()) == "SiluBackward");
  CHECK(std::string(F::leaky_relu(x).grad_fn_name()) == "LeakyReluBackward");
  CHECK(std::string(F::elu(x).grad_fn_name()) == "EluBackward");
  CHECK(std::string(F::softplus(x).grad_fn_name()) == "SoftplusBackward");
  CHECK(std::string(F::hardswish(x).grad_fn_name()) == "HardswishBackward");
  CHECK(std::string(F::mish(x).grad_fn_name()) == "MishBackward");
  // Nothing is recorded without a gradient to compute.
  CHECK_FALSE(F::mish(x.detach()).requires_grad());
  {
    tg::NoGradGuard no_grad;
    CHECK_FALSE(F::silu(x).requires_grad());
  }
}

TEST_CASE("the CNN activations are bitwise the same at any thread count and vector level", "[activation][threads]") {
  const std::string name = GENERATE_REF(from_range(kNames));
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  INFO(name << " " << dtype);
  const ActivationCase& activation = activation_case(name);
  tg::manual_seed(7);
  // 3 chunks of parallel_for's 32768 elements and a partial one, with values across every branch.
  const Tensor x = tg::randn({100003}, dtype) * 8.0, dy = tg::randn({100003}, dtype);
  const auto run = [&] {
    Tensor input = x.clone().requires_grad_();
    Tensor y = activation.functional(input);
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{{"y", bytes(y)},
                                                                         {"dx", bytes(input.grad())}};
  };
  require_bitwise_identical_across_threads(run);
  const auto reference = run();
  for (const auto& [level, result] : tg::testing::at_every_supported_level(run)) {
    CAPTURE(level);
    REQUIRE(result == reference);
  }
}

TEST_CASE("the CNN activations refuse what PyTorch refuses", "[activation][errors]") {
  REQUIRE_TG_ERROR(F::silu(Tensor()), Catch::Contains("silu") && Catch::Contains("undefined"));
  REQUIRE_TG_ERROR(F::leaky_relu(tg::ones({2}, tg::kInt64)), Catch::Contains("leaky_relu") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(F::elu(tg::ones({2}, tg::kBool)), Catch::Contains("elu") && Catch::Contains("bool"));
  REQUIRE_TG_ERROR(F::softplus(Tensor()), Catch::Contains("softplus"));
  REQUIRE_TG_ERROR(F::hardswish(tg::ones({2}, tg::kInt64)), Catch::Contains("hardswish"));
  REQUIRE_TG_ERROR(tg::nn::Mish()(tg::ones({2}, tg::kInt64)), Catch::Contains("mish"));
}

TEST_CASE("activation modules keep PyTorch's defaults and their options", "[activation]") {
  CHECK(tg::nn::LeakyReLU().options.negative_slope == 0.01);
  CHECK(tg::nn::ELU().options.alpha == 1.0);
  CHECK(tg::nn::Softplus().options.beta == 1.0);
  CHECK(tg::nn::Softplus().options.threshold == 20.0);
  CHECK(tg::nn::Softplus({.beta = 2, .threshold = 5}).options.threshold == 5.0);
  // The options reach the computation.
  const Tensor x = tg::tensor(std::vector<double>{-2.0}, {1}, tg::kFloat64);
  CHECK(tg::nn::LeakyReLU({.negative_slope = 0.25})(x).item<double>() == -0.5);
  CHECK(tg::nn::ELU({.alpha = 3.0})(x).item<double>() == Approx(3.0 * std::expm1(-2.0)).epsilon(1e-15));
  CHECK(tg::nn::Softplus({.beta = 2.0})(x).item<double>() == Approx(std::log1p(std::exp(-4.0)) / 2.0).epsilon(1e-15));
  // Inside a Sequential, as a CNN uses them.
  tg::nn::Sequential net(tg::nn::Linear(3, 4), tg::nn::SiLU(), tg::nn::Linear(4, 2), tg::nn::Hardswish());
  CHECK(net(tg::randn({5, 3})).shape() == Shape{5, 2});
}

TEST_CASE("Unflatten splits a dim as nn.Unflatten and undoes Flatten", "[activation][flatten]") {
  const Tensor x = tg::randn({2, 60});
  tg::nn::Unflatten unflatten(1, {3, 4, 5});
  CHECK(unflatten(x).shape() == Shape{2, 3, 4, 5});
  CHECK(tg::nn::Unflatten(-1, {3, -1, 5})(x).shape() == Shape{2, 3, 4, 5});
  CHECK(tg::nn::Unflatten(0, {1, 2})(x).shape() == Shape{1, 2, 60});
  CHECK(tg::nn::Flatten()(unflatten(x)).to_vector<float>() == x.to_vector<float>());
  // Values keep their row-major order and the gradient flows back through the view.
  Tensor leaf_x = tg::tensor({1, 2, 3, 4, 5, 6}, {1, 6}).requires_grad_();
  Tensor split = tg::nn::Unflatten(1, {2, 3})(leaf_x);
  CHECK(split.shape() == Shape{1, 2, 3});
  CHECK(split.select(1, 1).to_vector<float>() == std::vector<float>{4, 5, 6});
  (split * tg::tensor({1, 2, 3, 4, 5, 6}, {1, 2, 3})).sum().backward();
  CHECK(leaf_x.grad().to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  REQUIRE_TG_ERROR(tg::nn::Unflatten(1, {7, 9})(x), Catch::Contains("unflatten") && Catch::Contains("[7, 9]") &&
                                                        Catch::Contains("60"));
  REQUIRE_TG_ERROR(tg::nn::Unflatten(2, {2, 30})(x), Catch::Contains("unflatten"));
  REQUIRE_TG_ERROR(tg::nn::Unflatten(1, {3, 4, 5})(Tensor()), Catch::Contains("Unflatten"));
}

TEST_CASE("a LeakyReLU critic's WGAN-GP gradient penalty and its gradient equal PyTorch's",
          "[activation][fixture][double_backward]") {
  // penalty = mean((‖∇ₓ̂ D(x̂)‖₂ − 1)²) at x̂ = ε x_real + (1 − ε) x_fake, D = linear-leaky_relu(0.2)-linear;
  // its gradient in D's parameters is a backward through the recorded backward of D.
  const tg::testing::FixtureCase& c = tg::testing::fixture("activation.txt", "wgan_gp_leaky_relu");
  const std::vector<std::string> names{"w1", "b1", "w2", "b2"};
  std::vector<Tensor> params;
  for (const std::string& n : names) params.push_back(leaf(c.at(n)));
  const auto critic = [&](const Tensor& input) {
    return F::linear(F::leaky_relu(F::linear(input, params[0], params[1]), 0.2), params[2], params[3]);
  };
  const Tensor eps = c.at("eps");
  const Tensor x_hat = leaf(eps * c.at("x_real") + (1.0 - eps) * c.at("x_fake"));
  const Tensor d_hat = critic(x_hat);
  const Tensor grad_x = tg::autograd::grad({d_hat}, {x_hat}, {tg::ones_like(d_hat)}, {.create_graph = true})[0];
  TG_REQUIRE_CLOSE(grad_x, c.at("grad_x"), 1e-12);
  const Tensor penalty = ((grad_x * grad_x).sum({1}).sqrt() - 1.0).pow(2.0).mean();
  TG_REQUIRE_CLOSE(penalty, c.at("penalty"), 1e-12);
  penalty.backward();
  for (size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    const Tensor grad = params[i].grad();
    if (c.has("d" + names[i])) {
      // b1 reaches the penalty only through leaky_relu's mask: zeros (torch's), or no gradient at all.
      TG_REQUIRE_CLOSE(grad.defined() ? grad : tg::zeros_like(params[i]), c.at("d" + names[i]), 1e-12);
    } else {
      CHECK((!grad.defined() || tg::testing::max_abs_diff(grad, tg::zeros_like(grad)) == 0.0));
    }
  }
  CHECK(tg::testing::max_abs_diff(params[0].grad(), tg::zeros_like(params[0])) > 1e-3);  // not vacuous
}
