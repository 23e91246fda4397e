// tg::gradcheck itself: it passes correct gradients, catches a wrong one and points at it, refuses
// float32; and the seed's composed LayerNorm, checked by value and by gradcheck.
#include <cmath>

#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::random_leaf;

TEST_CASE("gradcheck passes a correct composite and reports the worst element", "[core][gradcheck]") {
  tg::manual_seed(51);
  const Tensor a = random_leaf({3, 4}), b = random_leaf({4});
  const auto f = [](const std::vector<Tensor>& in) { return (in[0] * in[1]).exp().sum({-1}); };
  const tg::GradcheckResult r = tg::gradcheck(f, {a, b});
  INFO(r.message);
  REQUIRE(static_cast<bool>(r));
  CHECK(r.input >= 0);
  CHECK(r.max_abs_error.size() == 2);
  CHECK(r.max_abs_error[0] < 1e-6);
  CHECK(r.message.find("passed") != std::string::npos);
  // The user's tensors are not touched.
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("gradcheck fails a wrong gradient and says where", "[core][gradcheck]") {
  // f(x) = x * x.detach(): the tape sees d/dx = x, the true derivative is 2x.
  const Tensor x = tg::tensor({0.5, -1.0, 2.0, 1.5}, {2, 2}, tg::kFloat64).requires_grad_();
  const tg::GradcheckResult r =
      tg::gradcheck([](const std::vector<Tensor>& in) { return in[0] * in[0].detach(); }, {x});
  INFO(r.message);
  REQUIRE_FALSE(static_cast<bool>(r));
  REQUIRE(r.input == 0);
  REQUIRE(r.element >= 0);
  REQUIRE(r.element < 4);
  // Output element j depends only on x[j]; the worst mismatch is on the diagonal, at |x| = 2.
  CHECK(r.output_element == r.element);
  const double xj = x.to_vector<double>()[static_cast<size_t>(r.element)];
  CHECK(xj == 2.0);
  CHECK(r.analytic == Approx(xj).epsilon(1e-12));
  CHECK(r.numeric == Approx(2 * xj).epsilon(1e-6));
  CHECK(r.max_abs_error[0] == Approx(2.0).epsilon(1e-6));
  CHECK(r.message.find("FAILED") != std::string::npos);
}

TEST_CASE("gradcheck's passed line names the worst-agreeing element by index, with both values", "[core][gradcheck]") {
  // f(x) = x², elementwise: the Jacobian is diagonal. The finite-difference error of a square is
  // exact up to rounding, so the worst element relative to its tolerance is a diagonal one with
  // a gradient, never an off-diagonal zero.
  const Tensor x = tg::tensor({0.5, -1.0, 3.0, 1.5}, {2, 2}, tg::kFloat64).requires_grad_();
  const tg::GradcheckResult r = tg::gradcheck([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, {x});
  INFO(r.message);
  REQUIRE(r.passed);
  CHECK(r.output_element == r.element);
  CHECK(r.analytic == 2 * x.to_vector<double>()[static_cast<size_t>(r.element)]);
  CHECK(r.message.find("passed: all 16 Jacobian entries agree") != std::string::npos);
  const std::string index = r.element == 0 ? "[0, 0]" : r.element == 1 ? "[0, 1]" : r.element == 2 ? "[1, 0]" : "[1, 1]";
  CHECK(r.message.find("element " + index + ", output element " + index) != std::string::npos);
  CHECK(r.message.find("analytic " + std::to_string(static_cast<int>(r.analytic))) != std::string::npos);
  CHECK(r.message.find(" times the allowed ") != std::string::npos);
}

TEST_CASE("gradcheck runs fn in grad mode, so fn may register hooks", "[core][gradcheck][hooks]") {
  tg::manual_seed(54);
  const Tensor a = random_leaf({2, 3});
  int hook_calls = 0;
  // A hook that only observes: the gradients are still those of tanh(a)·2, and gradcheck passes.
  const auto observed = [&](const std::vector<Tensor>& in) {
    const Tensor hidden = in[0].tanh();
    hidden.register_hook([&](const Tensor&) {
      ++hook_calls;
      return Tensor();
    });
    return hidden * 2.0;
  };
  const tg::GradcheckResult r = tg::gradcheck(observed, {a});
  INFO(r.message);
  CHECK(r.passed);
  CHECK(hook_calls == 6);  // one backward per output element
  // A hook that doubles the gradient makes the analytic Jacobian twice the numeric one: caught.
  const auto doubled = [](const std::vector<Tensor>& in) {
    const Tensor hidden = in[0].tanh();
    hidden.register_hook([](const Tensor& grad) { return grad * 2.0; });
    return hidden * 2.0;
  };
  const tg::GradcheckResult wrong = tg::gradcheck(doubled, {a});
  INFO(wrong.message);
  CHECK_FALSE(wrong.passed);
  CHECK(wrong.analytic == Approx(2 * wrong.numeric).epsilon(1e-6));
}

TEST_CASE("gradcheck refuses to run under a NoGradGuard", "[core][gradcheck][errors]") {
  const Tensor x = tg::ones({2}, tg::kFloat64).requires_grad_();
  tg::NoGradGuard no_grad;
  REQUIRE_THROWS_WITH(tg::gradcheck([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {x}),
                      Catch::Contains("gradcheck") && Catch::Contains("grad mode is off"));
}

TEST_CASE("gradcheck only checks inputs that require grad", "[core][gradcheck]") {
  tg::manual_seed(52);
  const Tensor a = random_leaf({2, 2});
  const Tensor c = tg::randn({2, 2}, tg::kFloat64);  // constant: never perturbed
  const tg::GradcheckResult r = tg::gradcheck([](const std::vector<Tensor>& in) { return in[0] * in[1]; }, {a, c});
  INFO(r.message);
  REQUIRE(r.passed);
  CHECK(r.input == 0);
  CHECK(r.max_abs_error[1] == 0.0);
}

TEST_CASE("gradcheck demands float64 inputs", "[core][gradcheck][errors]") {
  const Tensor x = tg::ones({2}).requires_grad_();
  const auto f = [](const std::vector<Tensor>& in) { return in[0] * 2.0; };
  REQUIRE_THROWS_AS(tg::gradcheck(f, {x}), tg::Error);
  REQUIRE_THROWS_WITH(tg::gradcheck(f, {x}), Catch::Contains("gradcheck") && Catch::Contains("float64") &&
                                                 Catch::Contains("float32"));
  REQUIRE_THROWS_WITH(tg::gradcheck(f, {tg::ones({2}, tg::kFloat64)}), Catch::Contains("requires grad"));
}

TEST_CASE("gradcheck refuses a function whose output shape changes between calls", "[core][gradcheck][errors]") {
  const Tensor x = tg::ones({3}, tg::kFloat64).requires_grad_();
  int calls = 0;
  // Stateful: the first call returns 3 elements, every later one 6 (reading past a 3-element
  // layout was a heap overflow).
  const auto growing = [&calls](const std::vector<Tensor>& in) {
    const Tensor y = in[0] * 2.0;
    return ++calls == 1 ? y : tg::matmul(y.reshape({3, 1}), tg::ones({1, 2}, tg::kFloat64));
  };
  REQUIRE_THROWS_WITH(tg::gradcheck(growing, {x}), Catch::Contains("gradcheck") && Catch::Contains("[3, 2]") &&
                                                       Catch::Contains("[3]") && Catch::Contains("first call"));
  // A shape that depends on the values: the perturbed evaluations shrink the output.
  calls = 0;
  const auto shrinking = [&calls](const std::vector<Tensor>& in) {
    return ++calls == 1 ? in[0] * 1.0 : (in[0] * 1.0).sum();
  };
  REQUIRE_THROWS_WITH(tg::gradcheck(shrinking, {x}), Catch::Contains("returned shape []"));
}

TEST_CASE("gradcheck refuses a Jacobian too big to hold, naming its size, before allocating it",
          "[core][gradcheck][errors]") {
  const Tensor x = tg::zeros({200000}, tg::kFloat64).requires_grad_();  // 2e5 -> 2e5: 4e10 elements
  const auto identity = [](const std::vector<Tensor>& in) { return in[0] * 1.0; };
  REQUIRE_THROWS_WITH(tg::gradcheck(identity, {x}),
                      Catch::Contains("gradcheck") && Catch::Contains("[200000]") && Catch::Contains("4e+10 elements") &&
                          Catch::Contains("3.2e+11 bytes"));
}

namespace {
// The seed's LayerNorm over the last two dims, from primitive ops.
Tensor layer_norm_last_two(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  const Tensor mean = x.mean({-1, -2}, true);
  const Tensor var = x.var({-1, -2}, /*unbiased=*/false, /*keepdim=*/true);
  const Tensor normalized = (x - mean) / (var + 1e-5).sqrt();
  return gamma.defined() ? normalized * gamma + beta : normalized;
}
}  // namespace

TEST_CASE("composed LayerNorm over two dims reproduces the seed", "[core][seed]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const Tensor x = tg::tensor({0.2, 0.1, 0.3, 0.5, 0.1, 0.1}, {2, 1, 3}, dtype);
  const Tensor y = layer_norm_last_two(x, Tensor(), Tensor());
  CHECK(y.dtype() == dtype);
  const std::vector<double> expected{0.0000, -1.2238, 1.2238, 1.4140, -0.7070, -0.7070};
  const std::vector<double> actual = y.to(tg::kFloat64).to_vector<double>();
  REQUIRE(y.shape() == tg::Shape{2, 1, 3});
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i << ": " << actual[i]);
    // The seed prints 4 decimals: agree after rounding to them.
    CHECK(std::round(actual[i] * 1e4) / 1e4 == Approx(expected[i]).margin(1e-9));
  }
}

TEST_CASE("composed LayerNorm passes gradcheck with respect to x, gamma and beta", "[core][seed][gradcheck]") {
  tg::manual_seed(53);
  const Tensor x = tg::tensor({0.2, 0.1, 0.3, 0.5, 0.1, 0.1}, {2, 1, 3}, tg::kFloat64).requires_grad_();
  const Tensor gamma = random_leaf({1, 3}, 0.5, 1.5);
  const Tensor beta = random_leaf({1, 3});
  TG_REQUIRE_GRADCHECK(
      [](const std::vector<Tensor>& in) { return layer_norm_last_two(in[0], in[1], in[2]); },
      (std::vector<Tensor>{x, gamma, beta}));
  // And on random inputs of a larger shape.
  const Tensor x2 = random_leaf({3, 2, 3});
  TG_REQUIRE_GRADCHECK(
      [](const std::vector<Tensor>& in) { return layer_norm_last_two(in[0], in[1], in[2]); },
      (std::vector<Tensor>{x2, gamma, beta}));
}

// --- gradgradcheck: gradcheck of the first gradients, taken with create_graph ---

TEST_CASE("gradgradcheck passes correct second derivatives", "[core][gradgradcheck]") {
  tg::manual_seed(61);
  const Tensor a = random_leaf({3, 4}), b = random_leaf({4});
  const auto f = [](const std::vector<Tensor>& in) { return (in[0] * in[1]).tanh().sum({-1}); };
  const tg::GradcheckResult r = tg::gradgradcheck(f, {a, b});
  INFO(r.message);
  REQUIRE(r.passed);
  CHECK(r.message.rfind("gradgradcheck passed", 0) == 0);
  // One error slot per input of the function checked: a, b and the random grad_output.
  CHECK(r.max_abs_error.size() == 3);
  CHECK(r.max_abs_error[0] < 1e-6);
  CHECK(r.max_abs_error[2] < 1e-6);
  CHECK_FALSE(a.grad().defined());
  // A linear function: zero second derivatives, first gradients that depend on grad_output only.
  const tg::GradcheckResult linear = tg::gradgradcheck([](const std::vector<Tensor>& in) { return in[0] * 3.0; }, {a});
  INFO(linear.message);
  CHECK(linear.passed);
}

TEST_CASE("gradgradcheck catches a backward that is right once but not twice", "[core][gradgradcheck]") {
  // f(x) = tanh(x²), with a hook that hands on a detached copy of the gradient of x²: its value,
  // so the first derivative, is right (gradcheck passes), but the double backward loses the
  // dependence of that gradient on x and on grad_output.
  tg::manual_seed(62);
  const Tensor x = random_leaf({2, 3}, 0.5, 1.5);
  const auto f = [](const std::vector<Tensor>& in) {
    const Tensor square = in[0] * in[0];
    square.register_hook([](const Tensor& grad) { return grad.detach(); });
    return square.tanh();
  };
  const tg::GradcheckResult once = tg::gradcheck(f, {x});
  INFO(once.message);
  REQUIRE(once.passed);
  const tg::GradcheckResult twice = tg::gradgradcheck(f, {x});
  INFO(twice.message);
  REQUIRE_FALSE(twice.passed);
  CHECK(twice.message.rfind("gradgradcheck FAILED", 0) == 0);
  CHECK(twice.message.find("first gradient of input 0 (shape [2, 3])") != std::string::npos);
}

TEST_CASE("gradgradcheck takes a given grad_output, and checks its arguments", "[core][gradgradcheck][errors]") {
  tg::manual_seed(63);
  const Tensor x = random_leaf({2, 2});
  const auto f = [](const std::vector<Tensor>& in) { return in[0].exp() * in[0]; };
  // A constant grad_output (not requiring grad): only the inputs' second derivatives are checked.
  const tg::GradcheckResult r = tg::gradgradcheck(f, {x}, tg::ones({2, 2}, tg::kFloat64));
  INFO(r.message);
  CHECK(r.passed);
  CHECK(r.max_abs_error[1] == 0.0);
  REQUIRE_TG_ERROR(tg::gradgradcheck(f, {x}, tg::ones({3}, tg::kFloat64)),
                   Catch::Contains("gradgradcheck") && Catch::Contains("[2, 2]") && Catch::Contains("[3]"));
  REQUIRE_TG_ERROR(tg::gradgradcheck(f, {x}, tg::ones({2, 2})),
                   Catch::Contains("gradgradcheck") && Catch::Contains("float64"));
  REQUIRE_TG_ERROR(tg::gradgradcheck(f, {x.detach().to(tg::kFloat32).requires_grad_()}),
                   Catch::Contains("gradgradcheck") && Catch::Contains("float32"));
  REQUIRE_TG_ERROR(tg::gradgradcheck(f, {x.detach()}), Catch::Contains("requires grad"));
  tg::NoGradGuard no_grad;
  REQUIRE_TG_ERROR(tg::gradgradcheck(f, {x}), Catch::Contains("gradgradcheck") && Catch::Contains("grad mode is off"));
}
