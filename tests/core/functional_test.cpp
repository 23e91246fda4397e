// tg::autograd::functional: vjp, jvp, vhp, hvp, jacobian and hessian against hand-derived values
// and against torch.autograd.functional (tests/fixtures/make_higher_order_fixtures.py); create_graph,
// strict mode and the bad uses.
#include <cmath>

#include "core_test_util.hpp"

namespace F = tg::autograd::functional;
using tg::Tensor;
using tg::testing::leaf;

namespace {

using Inputs = std::vector<Tensor>;

Tensor f64(const std::vector<double>& values, const tg::Shape& shape = {}) {
  return tg::tensor(values, shape, tg::kFloat64);
}

// f(x) = Σ x³: gradient 3x², Hessian diag(6x).
Tensor sum_cubes(const Inputs& in) { return (in[0] * in[0] * in[0]).sum(); }

const tg::testing::FixtureCase& higher_order(const std::string& name) {
  return tg::testing::fixture("higher_order.txt", name);
}

constexpr double kTorchTol = 1e-10;

}  // namespace

TEST_CASE("vjp is the gradient of sum(f · v), and f's output alongside", "[core][functional]") {
  // f(A, b) = A b: vᵀJ is (v bᵀ, Aᵀ v).
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}), b = f64({1, -1, 2}), v = f64({2, -3});
  const auto [out, products] = F::vjp([](const Inputs& in) { return tg::matmul(in[0], in[1]); }, {a, b}, v);
  TG_REQUIRE_CLOSE(out, f64({5, 11}), 1e-15);
  REQUIRE(products.size() == 2);
  TG_REQUIRE_CLOSE(products[0], f64({2, -2, 4, -3, 3, -6}, {2, 3}), 1e-15);
  TG_REQUIRE_CLOSE(products[1], f64({-10, -11, -12}), 1e-15);
  // Without create_graph nothing is recorded into the caller's world.
  CHECK_FALSE(out.requires_grad());
  CHECK_FALSE(products[0].requires_grad());
  // v may be omitted for a one-element output: the plain gradient.
  const auto [value, grads] = F::vjp(sum_cubes, {f64({1, 2, -1})});
  CHECK(value.item() == 8.0);
  TG_REQUIRE_CLOSE(grads[0], f64({3, 12, 3}), 1e-15);
}

TEST_CASE("jvp is the directional derivative J·v, by the double-vjp trick", "[core][functional]") {
  // f(A, b) = A b: J·(dA, db) = dA b + A db.
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}), b = f64({1, -1, 2});
  const Tensor da = f64({1, 0, 0, 0, 1, 0}, {2, 3}), db = f64({0, 0, 1});
  const auto [out, product] = F::jvp([](const Inputs& in) { return tg::matmul(in[0], in[1]); }, {a, b}, {da, db});
  TG_REQUIRE_CLOSE(out, f64({5, 11}), 1e-15);
  TG_REQUIRE_CLOSE(product, f64({1 + 3, -1 + 6}), 1e-15);
  // One input of one element: v may be omitted (v = 1). d/dx of x² at 3 is 6.
  const auto [y, slope] = F::jvp([](const Inputs& in) { return in[0] * in[0]; }, {f64({3}, {1})});
  CHECK(y.item() == 9.0);
  CHECK(slope.item() == 6.0);
}

TEST_CASE("vhp and hvp of Σ x³ are 6 x v", "[core][functional]") {
  const Tensor x = f64({1, 2, -1}), v = f64({1, 1, 2});
  const auto [value, hv] = F::hvp(sum_cubes, {x}, {v});
  CHECK(value.item() == 8.0);
  TG_REQUIRE_CLOSE(hv[0], f64({6, 12, -12}), 1e-15);
  const auto [value2, vh] = F::vhp(sum_cubes, {x}, {v});
  CHECK(value2.item() == 8.0);
  TG_REQUIRE_CLOSE(vh[0], f64({6, 12, -12}), 1e-15);
  CHECK_FALSE(hv[0].requires_grad());
}

TEST_CASE("hvp of a function of two inputs has the cross terms", "[core][functional]") {
  // f(x, y) = Σ x² y: H = [[diag(2y), diag(2x)], [diag(2x), 0]]; H (vx, vy) = (2y vx + 2x vy, 2x vx).
  const Tensor x = f64({1, 2}), y = f64({3, -1}), vx = f64({1, -1}), vy = f64({2, 1});
  const auto f = [](const Inputs& in) { return (in[0] * in[0] * in[1]).sum(); };
  const auto [value, hv] = F::hvp(f, {x, y}, {vx, vy});
  CHECK(value.item() == 3.0 - 4.0);
  TG_REQUIRE_CLOSE(hv[0], f64({2 * 3 * 1 + 2 * 1 * 2, 2 * -1 * -1 + 2 * 2 * 1}), 1e-15);
  TG_REQUIRE_CLOSE(hv[1], f64({2 * 1 * 1, 2 * 2 * -1}), 1e-15);
  const auto [value2, vh] = F::vhp(f, {x, y}, {vx, vy});
  TG_REQUIRE_CLOSE(vh[0], hv[0], 1e-15);
  TG_REQUIRE_CLOSE(vh[1], hv[1], 1e-15);
}

TEST_CASE("jacobian has the output's shape followed by each input's", "[core][functional]") {
  // f(A, b) = A b: ∂f_i/∂A_kj = δ_ik b_j, ∂f/∂b = A.
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}), b = f64({1, -1, 2});
  const std::vector<Tensor> jac = F::jacobian([](const Inputs& in) { return tg::matmul(in[0], in[1]); }, {a, b});
  REQUIRE(jac.size() == 2);
  TG_REQUIRE_CLOSE(jac[0], f64({1, -1, 2, 0, 0, 0, 0, 0, 0, 1, -1, 2}, {2, 2, 3}), 1e-15);
  TG_REQUIRE_CLOSE(jac[1], a, 1e-15);
  // A function with two outputs: [k][i] = ∂out_k/∂in_i.
  const auto two = [](const Inputs& in) { return std::vector<Tensor>{in[0] * 2.0, in[0].sum()}; };
  const auto jacs = F::jacobian(two, {f64({1, 2})});
  REQUIRE(jacs.size() == 2);
  TG_REQUIRE_CLOSE(jacs[0][0], f64({2, 0, 0, 2}, {2, 2}), 1e-15);
  TG_REQUIRE_CLOSE(jacs[1][0], f64({1, 1}), 1e-15);
}

TEST_CASE("hessian of logsumexp is diag(p) - p pᵀ", "[core][functional]") {
  const Tensor x = f64({0.5, -1.0, 2.0});
  const auto h = F::hessian([](const Inputs& in) { return in[0].logsumexp({0}); }, {x});
  REQUIRE(h.size() == 1);
  REQUIRE(h[0].size() == 1);
  const std::vector<double> p = x.softmax(0).to_vector<double>();
  std::vector<double> expected;
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 3; ++j) expected.push_back((i == j ? p[i] : 0.0) - p[i] * p[j]);
  TG_REQUIRE_CLOSE(h[0][0], f64(expected, {3, 3}), 1e-15);
}

TEST_CASE("with create_graph the products can be differentiated again", "[core][functional]") {
  // hvp of Σ x³ is 6 x v; the gradient of Σ (6 x v) with respect to x is 6 v, and to v is 6 x.
  const Tensor x = f64({1, 2, -1}).requires_grad_(), v = f64({1, 1, 2}).requires_grad_();
  const auto [value, hv] = F::hvp(sum_cubes, {x}, {v}, {.create_graph = true});
  REQUIRE(hv[0].requires_grad());
  REQUIRE(value.requires_grad());
  const std::vector<Tensor> grads = tg::autograd::grad({hv[0].sum()}, {x, v});
  TG_REQUIRE_CLOSE(grads[0], f64({6, 6, 12}), 1e-15);
  TG_REQUIRE_CLOSE(grads[1], f64({6, 12, -6}), 1e-15);
  // The jacobian, too: d/dx Σ jac(x²) = d/dx Σ 2x = 2.
  const std::vector<Tensor> jac =
      F::jacobian([](const Inputs& in) { return in[0] * in[0]; }, {x}, {.create_graph = true});
  REQUIRE(jac[0].requires_grad());
  TG_REQUIRE_CLOSE(tg::autograd::grad({jac[0].sum()}, {x})[0], f64({2, 2, 2}), 1e-15);
  // The user's tensors' .grad were never touched.
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("strict mode refuses an output independent of an input; otherwise zeros", "[core][functional][errors]") {
  const Tensor x = f64({1, 2}), y = f64({3, 4});
  const auto uses_x_only = [](const Inputs& in) { return (in[0] * in[0]).sum(); };
  const auto [value, grads] = F::vjp(uses_x_only, {x, y});
  TG_REQUIRE_CLOSE(grads[1], f64({0, 0}), 0.0);
  REQUIRE_TG_ERROR(F::vjp(uses_x_only, {x, y}, {}, {.strict = true}),
                   Catch::Contains("vjp") && Catch::Contains("independent of input 1"));
  REQUIRE_TG_ERROR(F::jacobian(uses_x_only, {x, y}, {.strict = true}),
                   Catch::Contains("jacobian") && Catch::Contains("independent of input 1"));
  // A linear function's Hessian is zero; strict mode says its jacobian does not depend on the input.
  const auto linear = [](const Inputs& in) { return (in[0] * 3.0).sum(); };
  TG_REQUIRE_CLOSE(F::hvp(linear, {x}, {y}).second[0], f64({0, 0}), 0.0);
  TG_REQUIRE_CLOSE(F::hessian(linear, {x})[0][0], f64({0, 0, 0, 0}, {2, 2}), 0.0);
  REQUIRE_TG_ERROR(F::hvp(linear, {x}, {y}, {.strict = true}), Catch::Contains("hvp") && Catch::Contains("jacobian"));
  // An output that does not require grad at all.
  REQUIRE_TG_ERROR(F::jvp([](const Inputs& in) { return in[0].detach(); }, {x}, {y}, {.strict = true}),
                   Catch::Contains("jvp") && Catch::Contains("does not require grad"));
  TG_REQUIRE_CLOSE(F::jvp([](const Inputs& in) { return in[0].detach(); }, {x}, {y}).second, f64({0, 0}), 0.0);
}

TEST_CASE("functional's bad uses are tg::Errors naming the function and the shapes", "[core][functional][errors]") {
  const Tensor x = f64({1, 2, 3});
  REQUIRE_TG_ERROR(F::hvp(sum_cubes, {x}, {f64({1, 2})}),
                   Catch::Contains("hvp") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  REQUIRE_TG_ERROR(F::hvp(sum_cubes, {x}, {x, x}), Catch::Contains("hvp") && Catch::Contains("invalid length"));
  REQUIRE_TG_ERROR(F::hvp(sum_cubes, {x}), Catch::Contains("hvp") && Catch::Contains("v can only be omitted"));
  REQUIRE_TG_ERROR(F::hessian([](const Inputs& in) { return in[0] * 2.0; }, {x}),
                   Catch::Contains("hessian") && Catch::Contains("single element"));
  REQUIRE_TG_ERROR(F::vhp([](const Inputs& in) { return in[0] * 2.0; }, {x}, {x}),
                   Catch::Contains("vhp") && Catch::Contains("single element"));
  REQUIRE_TG_ERROR(F::vjp([](const Inputs& in) { return in[0] * 2.0; }, {x}),
                   Catch::Contains("vjp") && Catch::Contains("[3]"));
  REQUIRE_TG_ERROR(F::vjp([](const Inputs& in) { return in[0] * 2.0; }, {x}, tg::ones({3})),
                   Catch::Contains("vjp") && Catch::Contains("dtype"));
  REQUIRE_TG_ERROR(F::jacobian([](const Inputs&) { return Tensor(); }, {x}), Catch::Contains("undefined"));
  tg::NoGradGuard no_grad;
  REQUIRE_TG_ERROR(F::vjp(sum_cubes, {x}), Catch::Contains("vjp") && Catch::Contains("grad mode is off"));
}

TEST_CASE("hvp of an MLP's loss equals torch.autograd.functional.hvp", "[core][functional][fixture]") {
  const auto& c = higher_order("mlp_hvp");
  const Tensor x = c.at("x"), y = c.at("y");
  const std::vector<std::string> names{"w1", "b1", "w2", "b2"};
  Inputs params, v;
  for (const std::string& n : names) params.push_back(c.at(n)), v.push_back(c.at("v_" + n));
  // The loss through nn's fused Linear and MSE, and again through core ops only.
  const auto fused = [&](const Inputs& p) {
    return tg::nn::mse_loss(tg::nn::functional::linear(tg::nn::functional::linear(x, p[0], p[1]).tanh(), p[2], p[3]), y);
  };
  const auto composed = [&](const Inputs& p) {
    const Tensor h = (tg::matmul(x, p[0].t()) + p[1]).tanh();
    const Tensor d = tg::matmul(h, p[2].t()) + p[3] - y;
    return (d * d).mean();
  };
  for (const auto& [label, f] : {std::pair<const char*, F::Function>{"composed", composed}, {"fused", fused}}) {
    INFO(label);
    const auto [loss, hv] = F::hvp(f, params, v);
    TG_REQUIRE_CLOSE(loss, c.at("loss"), kTorchTol);
    const auto [loss2, vh] = F::vhp(f, params, v);
    const auto [loss3, grads] = F::vjp(f, params);
    for (size_t i = 0; i < names.size(); ++i) {
      INFO(names[i]);
      TG_REQUIRE_CLOSE(hv[i], c.at("hvp_" + names[i]), kTorchTol);
      TG_REQUIRE_CLOSE(vh[i], c.at("vhp_" + names[i]), kTorchTol);
      TG_REQUIRE_CLOSE(grads[i], c.at("grad_" + names[i]), kTorchTol);
    }
  }
}

TEST_CASE("jacobian, jvp and vjp of tanh(A b) equal PyTorch's", "[core][functional][fixture]") {
  const auto& c = higher_order("matvec_tanh");
  const auto f = [](const Inputs& in) { return tg::matmul(in[0], in[1]).tanh(); };
  const std::vector<Tensor> jac = F::jacobian(f, {c.at("a"), c.at("b")});
  TG_REQUIRE_CLOSE(jac[0], c.at("jac_a"), kTorchTol);
  TG_REQUIRE_CLOSE(jac[1], c.at("jac_b"), kTorchTol);
  const auto [y, jv] = F::jvp(f, {c.at("a"), c.at("b")}, {c.at("da"), c.at("db")});
  TG_REQUIRE_CLOSE(y, c.at("y"), kTorchTol);
  TG_REQUIRE_CLOSE(jv, c.at("jvp"), kTorchTol);
  const auto [y2, vj] = F::vjp(f, {c.at("a"), c.at("b")}, c.at("u"));
  TG_REQUIRE_CLOSE(vj[0], c.at("vjp_a"), kTorchTol);
  TG_REQUIRE_CLOSE(vj[1], c.at("vjp_b"), kTorchTol);
}

TEST_CASE("hessian of Σ tanh(x) exp(y) equals PyTorch's", "[core][functional][fixture]") {
  const auto& c = higher_order("tanh_exp");
  const auto h = F::hessian([](const Inputs& in) { return (in[0].tanh() * in[1].exp()).sum(); }, {c.at("x"), c.at("y")});
  REQUIRE(h.size() == 2);
  TG_REQUIRE_CLOSE(h[0][0], c.at("h_xx"), kTorchTol);
  TG_REQUIRE_CLOSE(h[0][1], c.at("h_xy"), kTorchTol);
  TG_REQUIRE_CLOSE(h[1][0], c.at("h_yx"), kTorchTol);
  TG_REQUIRE_CLOSE(h[1][1], c.at("h_yy"), kTorchTol);
}

TEST_CASE("a WGAN-GP gradient penalty and its gradient equal PyTorch's", "[core][functional][fixture]") {
  // penalty = mean((‖∇ₓ̂ D(x̂)‖₂ − 1)²) at x̂ = ε x_real + (1 − ε) x_fake, D = linear-act-linear;
  // its gradient in D's parameters is a backward through the recorded backward of D.
  const std::string activation = GENERATE(as<std::string>{}, "tanh", "relu");
  INFO(activation);
  const auto& c = higher_order("wgan_gp_" + activation);
  const std::vector<std::string> names{"w1", "b1", "w2", "b2"};
  std::vector<Tensor> params;
  for (const std::string& n : names) params.push_back(leaf(c.at(n)));
  const auto critic = [&](const Tensor& input) {
    const Tensor hidden = tg::nn::functional::linear(input, params[0], params[1]);
    return tg::nn::functional::linear(activation == "tanh" ? hidden.tanh() : hidden.relu(), params[2], params[3]);
  };
  const Tensor eps = c.at("eps");
  const Tensor x_hat = leaf(eps * c.at("x_real") + (1.0 - eps) * c.at("x_fake"));
  const Tensor d_hat = critic(x_hat);
  const Tensor grad_x = tg::autograd::grad({d_hat}, {x_hat}, {tg::ones_like(d_hat)}, {.create_graph = true})[0];
  TG_REQUIRE_CLOSE(grad_x, c.at("grad_x"), kTorchTol);
  const Tensor penalty = ((grad_x * grad_x).sum({1}).sqrt() - 1.0).pow(2.0).mean();
  TG_REQUIRE_CLOSE(penalty, c.at("penalty"), kTorchTol);
  penalty.backward();
  for (size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    const Tensor grad = params[i].grad();
    if (c.has("d" + names[i])) {
      // A parameter reached only through a mask (relu's b1) may be left without a gradient: zeros.
      TG_REQUIRE_CLOSE(grad.defined() ? grad : tg::zeros_like(params[i]), c.at("d" + names[i]), kTorchTol);
    } else {
      // torch leaves b2 without a gradient: the penalty does not depend on the last bias.
      CHECK((!grad.defined() || tg::testing::max_abs_diff(grad, tg::zeros_like(grad)) == 0.0));
    }
  }
}
