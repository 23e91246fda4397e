// Double backward of the core's ops: with create_graph the gradient an op's backward returns is
// itself recorded, so it can be differentiated again. Every op is checked in float64 against
// central finite differences of its first gradient, w.r.t. its inputs and w.r.t. the output
// gradient (the backward is linear in it, and a backward that drops it from the graph is wrong);
// a few second derivatives are checked against hand-derived formulas.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::random_leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

const tg::autograd::GradOptions kCreateGraph{.create_graph = true, .allow_unused = true, .materialize_grads = true};
const tg::autograd::GradOptions kPlain{.allow_unused = true, .materialize_grads = true};

// Σ_i <u_i, ∂<f(inputs), v>/∂inputs_i>, the first gradient of f dotted with fixed directions u,
// computed without recording (the value the finite differences read).
double first_gradient_dot(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& v,
                          const std::vector<Tensor>& u) {
  const std::vector<Tensor> grads = tg::autograd::grad({f(inputs)}, inputs, {v}, kPlain);
  double dot = 0;
  for (size_t i = 0; i < grads.size(); ++i) dot += (grads[i] * u[i]).sum().item();
  return dot;
}

// Checks the second derivatives of f at `inputs` (float64 leaves that require grad): s(inputs, v) =
// Σ_i <u_i, ∂<f, v>/∂inputs_i> for random v and u, differentiated by the recorded backward
// (create_graph) w.r.t. every input and v, against central differences of s.
void check_double_backward(const std::string& name, const Fn& f, std::vector<Tensor> inputs, double tol = 1e-6) {
  INFO("op: " << name);
  Tensor out = f(inputs);
  REQUIRE(out.requires_grad());
  Tensor v = tg::randn(out.shape(), tg::kFloat64).requires_grad_();
  const std::vector<Tensor> grads = tg::autograd::grad({out}, inputs, {v}, kCreateGraph);
  std::vector<Tensor> u;
  Tensor s = tg::scalar_tensor(0.0, tg::kFloat64);
  for (const Tensor& grad : grads) {
    u.push_back(tg::randn(grad.shape(), tg::kFloat64));
    s = s + (grad * u.back()).sum();
  }
  REQUIRE(s.requires_grad());
  std::vector<Tensor> wrt = inputs;
  wrt.push_back(v);
  const std::vector<Tensor> analytic = tg::autograd::grad({s}, wrt, {}, kPlain);
  const double eps = 1e-6;
  for (size_t t = 0; t < wrt.size(); ++t) {
    Tensor target = wrt[t];
    double* values = target.mutable_data<double>();
    const std::vector<double> expected_grad = analytic[t].to_vector<double>();
    for (int64_t k = 0; k < target.numel(); ++k) {
      const double saved = values[k];
      values[k] = saved + eps;
      const double plus = first_gradient_dot(f, inputs, v.detach(), u);
      values[k] = saved - eps;
      const double minus = first_gradient_dot(f, inputs, v.detach(), u);
      values[k] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      INFO((t < inputs.size() ? "input " + std::to_string(t) : std::string("grad_output")) << ", element " << k
                                                                                           << ": analytic "
                                                                                           << expected_grad[k]
                                                                                           << ", numeric " << numeric);
      REQUIRE(std::abs(expected_grad[k] - numeric) <= tol * 10 * (1 + std::abs(numeric)));
    }
  }
}

// A float64 leaf that requires grad, uniform in [low, high).
Tensor leaf(const tg::Shape& shape, double low = -1.0, double high = 1.0) { return random_leaf(shape, low, high); }

Tensor int_index(const std::vector<int64_t>& values, const tg::Shape& shape) {
  return tg::tensor(values, shape, tg::kInt64);
}

}  // namespace

TEST_CASE("elementwise ops are twice differentiable", "[core][double_backward]") {
  tg::manual_seed(3001);
  check_double_backward("add", [](auto& in) { return in[0] + in[1]; }, {leaf({2, 3}), leaf({3})});
  check_double_backward("sub", [](auto& in) { return in[0] - in[1]; }, {leaf({2, 1}), leaf({3})});
  check_double_backward("mul", [](auto& in) { return in[0] * in[1]; }, {leaf({2, 3}), leaf({3})});
  check_double_backward("div", [](auto& in) { return in[0] / in[1]; }, {leaf({2, 3}), leaf({3}, 0.5, 2.0)});
  check_double_backward("pow(tensor, tensor)", [](auto& in) { return tg::pow(in[0], in[1]); },
                        {leaf({2, 3}, 0.5, 2.0), leaf({3}, -1.5, 2.5)});
  check_double_backward("pow(tensor, 2.5)", [](auto& in) { return in[0].pow(2.5); }, {leaf({4}, 0.5, 2.0)});
  check_double_backward("pow(tensor, 2)", [](auto& in) { return in[0].pow(2.0); }, {leaf({4})});
  check_double_backward("pow(2, tensor)", [](auto& in) { return tg::pow(2.0, in[0]); }, {leaf({4})});
  check_double_backward("neg", [](auto& in) { return -in[0]; }, {leaf({4})});
  check_double_backward("sqrt", [](auto& in) { return in[0].sqrt(); }, {leaf({4}, 0.5, 2.0)});
  check_double_backward("rsqrt", [](auto& in) { return in[0].rsqrt(); }, {leaf({4}, 0.5, 2.0)});
  check_double_backward("exp", [](auto& in) { return in[0].exp(); }, {leaf({4})});
  check_double_backward("log", [](auto& in) { return in[0].log(); }, {leaf({4}, 0.5, 2.0)});
  check_double_backward("log1p", [](auto& in) { return in[0].log1p(); }, {leaf({4}, -0.5, 2.0)});
  check_double_backward("erf", [](auto& in) { return in[0].erf(); }, {leaf({5}, -2.0, 2.0)});
  check_double_backward("abs", [](auto& in) { return in[0].abs(); }, {leaf({5})});
  check_double_backward("relu", [](auto& in) { return in[0].relu(); }, {leaf({6})});
  check_double_backward("tanh", [](auto& in) { return in[0].tanh(); }, {leaf({5}, -2.0, 2.0)});
  check_double_backward("sigmoid", [](auto& in) { return in[0].sigmoid(); }, {leaf({5}, -3.0, 3.0)});
  check_double_backward("gelu", [](auto& in) { return in[0].gelu(); }, {leaf({6}, -3.0, 3.0)});
  check_double_backward("gelu tanh", [](auto& in) { return in[0].gelu("tanh"); }, {leaf({6}, -3.0, 3.0)});
  check_double_backward("clamp", [](auto& in) { return in[0].clamp(-0.5, 0.4); }, {leaf({8})});
  check_double_backward("clamp tensors",
                        [](auto& in) { return in[0].clamp(std::optional<Tensor>(in[1]), std::optional<Tensor>(in[2])); },
                        {leaf({3, 4}), leaf({4}, -1.0, -0.2), leaf({3, 1}, 0.2, 1.0)});
  check_double_backward("maximum", [](auto& in) { return tg::maximum(in[0], in[1]); }, {leaf({3, 4}), leaf({4})});
  check_double_backward("minimum", [](auto& in) { return tg::minimum(in[0], in[1]); }, {leaf({3, 4}), leaf({4})});
  const Tensor mask = tg::tensor({1.0, 0.0, 0.0, 1.0}, {4}, tg::kFloat64).gt(0.5);
  check_double_backward("where", [mask](auto& in) { return tg::where(mask, in[0], in[1]); },
                        {leaf({3, 4}), leaf({1})});
  check_double_backward("masked_fill", [mask](auto& in) { return in[0].masked_fill(mask, 2.0); }, {leaf({2, 4})});
  check_double_backward("clone", [](auto& in) { return in[0].clone() * in[0]; }, {leaf({3})});
}

TEST_CASE("reductions and the softmax family are twice differentiable", "[core][double_backward]") {
  tg::manual_seed(3002);
  check_double_backward("sum", [](auto& in) { return in[0].sum(); }, {leaf({2, 3})});
  check_double_backward("sum dims", [](auto& in) { return (in[0] * in[0]).sum({0, 2}); }, {leaf({2, 3, 2})});
  check_double_backward("mean dims keepdim", [](auto& in) { return in[0].mean({1}, true) * in[0]; }, {leaf({2, 3})});
  check_double_backward("var", [](auto& in) { return in[0].var({1}); }, {leaf({2, 4})});
  check_double_backward("var all, biased", [](auto& in) { return in[0].var(std::vector<int64_t>{}, false, false); },
                        {leaf({5})});
  check_double_backward("std", [](auto& in) { return in[0].std({0}, true, true); }, {leaf({4, 2})});
  check_double_backward("std all", [](auto& in) { return in[0].std(); }, {leaf({5})});
  check_double_backward("softmax", [](auto& in) { return tg::softmax(in[0], 1); }, {leaf({2, 4})});
  check_double_backward("softmax dim 0", [](auto& in) { return tg::softmax(in[0], 0); }, {leaf({3, 2})});
  check_double_backward("log_softmax", [](auto& in) { return tg::log_softmax(in[0], -1); }, {leaf({2, 4})});
  check_double_backward("logsumexp", [](auto& in) { return tg::logsumexp(in[0], {1}); }, {leaf({2, 4})});
  check_double_backward("logsumexp dims", [](auto& in) { return tg::logsumexp(in[0], {0, 2}, true); },
                        {leaf({2, 2, 3})});
  check_double_backward("max dim", [](auto& in) { return in[0].max(1).values * in[0].sum({1}); }, {leaf({3, 4})});
  check_double_backward("min dim keepdim", [](auto& in) { return in[0].min(0, true).values; }, {leaf({3, 4})});
  check_double_backward("max all", [](auto& in) { return in[0].max() * in[0]; }, {leaf({2, 3})});
  check_double_backward("min all", [](auto& in) { return in[0].min(); }, {leaf({5})});
  check_double_backward("sort", [](auto& in) { return in[0].sort(1).values * in[0]; }, {leaf({2, 4})});
  check_double_backward("topk", [](auto& in) { return in[0].topk(2, 0).values.exp(); }, {leaf({4, 3})});
}

TEST_CASE("shape, slicing and joining ops are twice differentiable", "[core][double_backward]") {
  tg::manual_seed(3003);
  // Each linear op composed with a square, so that its own backward is differentiated w.r.t. a
  // gradient that depends on the input.
  const auto squared = [](std::function<Tensor(const Tensor&)> op) {
    return [op](const std::vector<Tensor>& in) {
      const Tensor y = op(in[0]);
      return y * y;
    };
  };
  check_double_backward("reshape", squared([](const Tensor& x) { return x.reshape({3, 2}); }), {leaf({2, 3})});
  check_double_backward("view", squared([](const Tensor& x) { return x.view({-1}); }), {leaf({2, 3})});
  check_double_backward("unsqueeze/squeeze", squared([](const Tensor& x) { return x.unsqueeze(1).squeeze(); }),
                        {leaf({2, 3})});
  check_double_backward("flatten/unflatten",
                        squared([](const Tensor& x) { return x.flatten().unflatten(0, {3, 2}); }), {leaf({2, 3})});
  check_double_backward("transpose", squared([](const Tensor& x) { return x.transpose(0, 2); }), {leaf({2, 3, 2})});
  check_double_backward("permute", squared([](const Tensor& x) { return x.permute({1, 2, 0}); }), {leaf({2, 3, 2})});
  check_double_backward("t", squared([](const Tensor& x) { return x.t(); }), {leaf({2, 3})});
  check_double_backward("narrow", squared([](const Tensor& x) { return x.narrow(1, 1, 2); }), {leaf({2, 4})});
  check_double_backward("select", squared([](const Tensor& x) { return x.select(0, -1); }), {leaf({3, 2})});
  check_double_backward("slice step", squared([](const Tensor& x) { return x.slice(1, 0, std::nullopt, 2); }),
                        {leaf({2, 5})});
  check_double_backward("expand", squared([](const Tensor& x) { return x.expand({2, 3, 2}); }), {leaf({3, 1})});
  check_double_backward("tril", squared([](const Tensor& x) { return x.tril(); }), {leaf({3, 3})});
  check_double_backward("triu", squared([](const Tensor& x) { return x.triu(1); }), {leaf({2, 3, 3})});
  check_double_backward("cat", [](auto& in) { return tg::cat({in[0] * in[1].sum(), in[1]}, 1); },
                        {leaf({2, 2}), leaf({2, 3})});
  check_double_backward("stack", [](auto& in) { return tg::stack({in[0] * in[1], in[1]}, 0); },
                        {leaf({2, 2}), leaf({2, 2})});
  check_double_backward("split", [](auto& in) {
    const std::vector<Tensor> pieces = tg::split(in[0], {1, 3}, 1);
    return pieces[1] * pieces[0];
  }, {leaf({2, 4})});
  check_double_backward("chunk", [](auto& in) {
    const std::vector<Tensor> pieces = tg::chunk(in[0], 2, 0);
    return pieces[0] * pieces[1].exp();
  }, {leaf({4, 2})});
}

TEST_CASE("indexing ops are twice differentiable", "[core][double_backward]") {
  tg::manual_seed(3004);
  const Tensor rows = int_index({2, 0, 2}, {3});
  check_double_backward("index_select", [rows](auto& in) { return tg::index_select(in[0], 0, rows).pow(2.0); },
                        {leaf({3, 2})});
  check_double_backward("index_select dim 1", [rows](auto& in) { return tg::index_select(in[0], 1, rows).exp(); },
                        {leaf({2, 3})});
  const Tensor index = int_index({0, 2, 1, 1, 0, 0}, {2, 3});
  check_double_backward("gather", [index](auto& in) { return tg::gather(in[0], 1, index).pow(3.0); },
                        {leaf({2, 4})});
  // src larger than the index: the elements it does not reach get no gradient.
  const Tensor scatter_index = int_index({0, 1, 1, 2}, {2, 2});
  check_double_backward("scatter_add",
                        [scatter_index](auto& in) { return tg::scatter_add(in[0], 0, scatter_index, in[1]).pow(2.0); },
                        {leaf({3, 2}), leaf({3, 3})});
}

TEST_CASE("matrix products are twice differentiable", "[core][double_backward]") {
  tg::manual_seed(3005);
  check_double_backward("matmul 2-D", [](auto& in) { return tg::matmul(in[0], in[1]); }, {leaf({2, 3}), leaf({3, 2})});
  check_double_backward("matmul vector-matrix", [](auto& in) { return tg::matmul(in[0], in[1]); },
                        {leaf({3}), leaf({3, 2})});
  check_double_backward("matmul matrix-vector", [](auto& in) { return tg::matmul(in[0], in[1]); },
                        {leaf({2, 3}), leaf({3})});
  check_double_backward("matmul dot", [](auto& in) { return tg::matmul(in[0], in[1]); }, {leaf({3}), leaf({3})});
  check_double_backward("matmul batched fold", [](auto& in) { return tg::matmul(in[0], in[1]); },
                        {leaf({2, 2, 3}), leaf({3, 2})});
  check_double_backward("matmul broadcast batch", [](auto& in) { return tg::matmul(in[0], in[1]); },
                        {leaf({2, 1, 2, 3}), leaf({3, 3, 2})});
  check_double_backward("matmul squared", [](auto& in) { return tg::matmul(in[0], in[0].t()).tanh(); },
                        {leaf({2, 3})});
  check_double_backward("bmm", [](auto& in) { return tg::bmm(in[0], in[1]); }, {leaf({2, 2, 3}), leaf({2, 3, 2})});
  check_double_backward("baddbmm",
                        [](auto& in) { return tg::baddbmm(in[0], in[1], in[2], 0.5, 2.0); },
                        {leaf({2, 1}), leaf({2, 2, 3}), leaf({2, 3, 1})});
}

TEST_CASE("hand-derived second derivatives", "[core][double_backward]") {
  const Tensor x = tg::tensor({-1.5, -0.2, 0.3, 1.1}, {4}, tg::kFloat64).requires_grad_();
  const std::vector<double> xs = x.to_vector<double>();
  // Σ f(x_i): the first gradient is f'(x), the gradient of Σ f'(x_i) is f''(x).
  const auto second = [&](const Tensor& y) {
    const Tensor first = tg::autograd::grad({y.sum()}, {x}, {}, kCreateGraph)[0];
    return tg::autograd::grad({first.sum()}, {x})[0].to_vector<double>();
  };
  SECTION("exp: (e^x)'' = e^x") {
    const std::vector<double> h = second(x.exp());
    for (size_t i = 0; i < xs.size(); ++i) CHECK(h[i] == Approx(std::exp(xs[i])).epsilon(1e-14));
  }
  SECTION("tanh: tanh'' = −2 tanh (1 − tanh²)") {
    const std::vector<double> h = second(x.tanh());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double t = std::tanh(xs[i]);
      CHECK(h[i] == Approx(-2 * t * (1 - t * t)).epsilon(1e-13));
    }
  }
  SECTION("sigmoid: σ'' = σ (1 − σ)(1 − 2σ)") {
    const std::vector<double> h = second(x.sigmoid());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double s = 1 / (1 + std::exp(-xs[i]));
      CHECK(h[i] == Approx(s * (1 - s) * (1 - 2 * s)).epsilon(1e-13));
    }
  }
  SECTION("gelu: gelu'' = φ(x) (2 − x²)") {
    const std::vector<double> h = second(x.gelu());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double phi = std::exp(-xs[i] * xs[i] / 2) / std::sqrt(2 * M_PI);
      CHECK(h[i] == Approx(phi * (2 - xs[i] * xs[i])).epsilon(1e-13));
    }
  }
  SECTION("exp three times: (e^x)''' = e^x") {
    const Tensor first = tg::autograd::grad({x.exp().sum()}, {x}, {}, kCreateGraph)[0];
    const Tensor second_grad = tg::autograd::grad({first.sum()}, {x}, {}, kCreateGraph)[0];
    const std::vector<double> third = tg::autograd::grad({second_grad.sum()}, {x})[0].to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) CHECK(third[i] == Approx(std::exp(xs[i])).epsilon(1e-14));
  }
  SECTION("cross terms of x·y²: ∂²/∂x∂y = 2y, ∂²/∂y² = 2x") {
    const Tensor y = tg::tensor({0.5, -2.0, 1.5, 3.0}, {4}, tg::kFloat64).requires_grad_();
    const Tensor f = (x * y * y).sum();
    const std::vector<Tensor> g = tg::autograd::grad({f}, {x, y}, {}, kCreateGraph);  // y², 2xy
    const std::vector<Tensor> dx_terms =
        tg::autograd::grad({g[0].sum()}, {x, y}, {}, {.retain_graph = true, .allow_unused = true, .materialize_grads = true});
    const std::vector<Tensor> dy_terms = tg::autograd::grad({g[1].sum()}, {x, y}, {}, kPlain);
    const std::vector<double> ys = y.to_vector<double>();
    const std::vector<double> xx = dx_terms[0].to_vector<double>(), xy = dx_terms[1].to_vector<double>();
    const std::vector<double> yx = dy_terms[0].to_vector<double>(), yy = dy_terms[1].to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      CHECK(xx[i] == 0.0);
      CHECK(xy[i] == 2 * ys[i]);
      CHECK(yx[i] == 2 * ys[i]);
      CHECK(yy[i] == 2 * xs[i]);
    }
  }
  SECTION("relu at its kink: relu'(0) = 0 and the second derivative is 0 everywhere") {
    const Tensor z = tg::tensor({-1.0, 0.0, 2.0}, {3}, tg::kFloat64).requires_grad_();
    const Tensor v = tg::tensor({1.0, 1.0, 1.0}, {3}, tg::kFloat64).requires_grad_();
    const Tensor first = tg::autograd::grad({z.relu()}, {z}, {v}, kCreateGraph)[0];
    CHECK(first.to_vector<double>() == std::vector<double>{0.0, 0.0, 1.0});
    const std::vector<Tensor> second_terms = tg::autograd::grad({first.sum()}, {z, v}, {}, kPlain);
    CHECK(second_terms[0].to_vector<double>() == std::vector<double>{0.0, 0.0, 0.0});
    CHECK(second_terms[1].to_vector<double>() == std::vector<double>{0.0, 0.0, 1.0});  // threshold_backward
  }
}

TEST_CASE("matmul Hessian-vector product of a quadratic form", "[core][double_backward]") {
  // f(x) = ½ xᵀ A x: ∇f = ½ (A + Aᵀ) x, and the Hessian-vector product H v = ½ (A + Aᵀ) v.
  const Tensor a = tg::tensor({2.0, -1.0, 0.5, 3.0, 1.0, -2.0, 0.25, 4.0, -0.5}, {3, 3}, tg::kFloat64);
  const Tensor x = tg::tensor({0.3, -1.2, 2.0}, {3}, tg::kFloat64).requires_grad_();
  const Tensor v = tg::tensor({1.0, 0.5, -2.0}, {3}, tg::kFloat64);
  const Tensor f = tg::matmul(x, tg::matmul(a, x)) * 0.5;
  const Tensor gradient = tg::autograd::grad({f}, {x}, {}, kCreateGraph)[0];
  const Tensor hv = tg::autograd::grad({(gradient * v).sum()}, {x})[0];
  const std::vector<double> av = tg::matmul(a, v).to_vector<double>(), atv = tg::matmul(a.t(), v).to_vector<double>();
  const std::vector<double> got = hv.to_vector<double>();
  for (size_t i = 0; i < 3; ++i) CHECK(got[i] == Approx(0.5 * (av[i] + atv[i])).epsilon(1e-14));
}

TEST_CASE("float32 GELU's second derivative agrees with float64's", "[core][double_backward]") {
  // The float32 path saves gelu'(x) from its fused kernel; a recorded backward recomputes it from x.
  for (const char* approximate : {"none", "tanh"}) {
    INFO("approximate = " << approximate);
    const Tensor x64 = tg::tensor({-3.0, -1.0, -0.25, 0.0, 0.5, 1.75, 4.0}, {7}, tg::kFloat64).requires_grad_();
    const Tensor x32 = x64.detach().to(tg::kFloat32).requires_grad_();
    const auto second = [&](const Tensor& x) {
      const Tensor first = tg::autograd::grad({x.gelu(approximate).sum()}, {x}, {}, kCreateGraph)[0];
      return tg::autograd::grad({(first * first).sum()}, {x})[0].to(tg::kFloat64);
    };
    TG_REQUIRE_NEAR(second(x32), second(x64), 1e-5);
  }
}

TEST_CASE("a recorded backward gives the first gradient of a plain one", "[core][double_backward]") {
  // With and without create_graph the first gradient is the same function: the plain pass runs the
  // fused kernels, the recorded one tg ops, so they agree to rounding (the plain pass's exact bits
  // are checked by the other suites).
  tg::manual_seed(3006);
  const Tensor x = random_leaf({4, 5});
  const Tensor w = random_leaf({5, 3});
  const auto loss = [&] { return tg::log_softmax(tg::matmul(x, w).tanh(), 1).sum() + x.gelu().std(); };
  const std::vector<Tensor> plain = tg::autograd::grad({loss()}, {x, w});
  const std::vector<Tensor> recorded = tg::autograd::grad({loss()}, {x, w}, {}, kCreateGraph);
  REQUIRE(recorded[0].requires_grad());
  TG_REQUIRE_NEAR(recorded[0].detach(), plain[0], 1e-12);
  TG_REQUIRE_NEAR(recorded[1].detach(), plain[1], 1e-12);
  REQUIRE_FALSE(plain[0].requires_grad());
}
