// Custom autograd functions (tapegrad/autograd/function.hpp), checked against libtorch's documented
// behaviour (torch/csrc/autograd/custom_function.h) and hand-derived gradients: saved tensors and
// values, several outputs, non-differentiable outputs, in-place (dirty) inputs, needs_input_grad,
// the checks on what backward returns, no_grad, hooks, anomaly mode, gradcheck, second derivatives
// through create_graph (refused by name through a backward that was not recorded), a second
// backward through a freed graph, and a backward that throws.
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core_test_util.hpp"
#include "tapegrad/autograd/function.hpp"
#include "tapegrad/autograd/grad.hpp"
#include "tapegrad/gradcheck.hpp"

using tg::Tensor;
using tg::autograd::AutogradContext;
using tg::autograd::Function;
using tg::autograd::variable_list;
using Catch::Matchers::Contains;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// The pass options the tests use (set by name: the structs have members without defaults).
tg::autograd::GradOptions recorded() {
  tg::autograd::GradOptions options;
  options.create_graph = true;
  return options;
}
tg::BackwardOptions create_graph() {
  tg::BackwardOptions options;
  options.create_graph = true;
  return options;
}
tg::BackwardOptions retain_graph() {
  tg::BackwardOptions options;
  options.retain_graph = true;
  return options;
}

// y = tanh(scale · x + shift): a tensor, a double and a tensor in, one tensor out. Saves the output
// (dy/d(pre) = 1 − y²) and the scale in saved_data.
struct ScaleShiftTanh : Function<ScaleShiftTanh> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double scale, const Tensor& shift) {
    Tensor y = (x * scale + shift).tanh();
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({y});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const Tensor y = ctx->get_saved_variables()[0];
    const Tensor grad_pre = grad_outputs[0] * (1.0 - y * y);
    return {grad_pre * ctx->saved_data["scale"].toDouble(), Tensor(), grad_pre};
  }
};

TEST_CASE("a custom function: forward's value, backward's gradients, its node's name", "[core][custom_function]") {
  Tensor x = tg::tensor({-1.0, 0.5, 2.0}, {3}, tg::kFloat64).requires_grad_();
  Tensor shift = tg::tensor({0.25, -0.5, 0.0}, {3}, tg::kFloat64).requires_grad_();
  const Tensor y = ScaleShiftTanh::apply(x, 0.5, shift);
  REQUIRE(std::string(y.grad_fn_name()) == "ScaleShiftTanhBackward");
  REQUIRE(y.requires_grad());
  REQUIRE(y.output_nr() == 0);
  const std::vector<double> xs{-1.0, 0.5, 2.0}, shifts{0.25, -0.5, 0.0};
  for (size_t i = 0; i < 3; ++i) CHECK(values(y)[i] == Approx(std::tanh(0.5 * xs[i] + shifts[i])).epsilon(1e-15));
  (y * tg::tensor({1.0, 2.0, 3.0}, {3}, tg::kFloat64)).sum().backward();
  for (size_t i = 0; i < 3; ++i) {
    const double t = std::tanh(0.5 * xs[i] + shifts[i]);
    const double weight = static_cast<double>(i + 1);
    CHECK(values(x.grad())[i] == Approx(weight * (1 - t * t) * 0.5).epsilon(1e-14));
    CHECK(values(shift.grad())[i] == Approx(weight * (1 - t * t)).epsilon(1e-14));
  }
}

TEST_CASE("a custom function passes gradcheck", "[core][custom_function]") {
  Tensor x = tg::testing::random_leaf({2, 3});
  Tensor shift = tg::testing::random_leaf({2, 3});
  const auto fn = [](const std::vector<Tensor>& in) { return ScaleShiftTanh::apply(in[0], 1.7, in[1]); };
  const tg::GradcheckResult result = tg::gradcheck(fn, {x, shift});
  INFO(result.message);
  REQUIRE(result.passed);
}

// Two outputs: e = exp(x) and s = x², with e saved as an output and x as an input. Records what
// backward received.
struct ExpAndSquare : Function<ExpAndSquare> {
  static inline std::vector<bool> seen_defined;
  static variable_list forward(AutogradContext* ctx, const Tensor& x, bool materialize) {
    Tensor e = x.exp();
    Tensor s = x * x;
    ctx->set_materialize_grads(materialize);
    ctx->save_for_backward({e, x});
    return {e, s};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    seen_defined = {grad_outputs[0].defined(), grad_outputs[1].defined()};
    Tensor grad = tg::zeros_like(saved[1]);
    if (grad_outputs[0].defined()) grad = grad + grad_outputs[0] * saved[0];
    if (grad_outputs[1].defined()) grad = grad + grad_outputs[1] * 2.0 * saved[1];
    return {grad, Tensor()};
  }
};

TEST_CASE("several outputs: one node, output_nr per output, undefined gradients materialised as zeros",
          "[core][custom_function]") {
  Tensor x = tg::tensor({0.0, 1.0}, {2}, tg::kFloat64).requires_grad_();
  SECTION("both outputs used") {
    const variable_list out = ExpAndSquare::apply(x, true);
    REQUIRE(out.size() == 2);
    CHECK(out[0].output_nr() == 0);
    CHECK(out[1].output_nr() == 1);
    CHECK(std::string(out[1].grad_fn_name()) == "ExpAndSquareBackward");
    (out[0] * 3.0 + out[1] * 5.0).sum().backward();
    // 3 eˣ + 10 x
    CHECK(values(x.grad())[0] == Approx(3.0));
    CHECK(values(x.grad())[1] == Approx(3.0 * std::exp(1.0) + 10.0).epsilon(1e-15));
    CHECK(ExpAndSquare::seen_defined == std::vector<bool>{true, true});
  }
  SECTION("one output used: the other's gradient arrives as zeros") {
    const variable_list out = ExpAndSquare::apply(x, true);
    out[1].sum().backward();
    CHECK(ExpAndSquare::seen_defined == std::vector<bool>{true, true});
    CHECK(values(x.grad()) == std::vector<double>{0.0, 2.0});
  }
  SECTION("set_materialize_grads(false): undefined instead") {
    const variable_list out = ExpAndSquare::apply(x, false);
    out[0].sum().backward();
    CHECK(ExpAndSquare::seen_defined == std::vector<bool>{true, false});
    CHECK(values(x.grad())[1] == Approx(std::exp(1.0)).epsilon(1e-15));
  }
}

// Values and a mask of the positive entries: the mask is marked non-differentiable; an int64
// output (the count) is non-differentiable by its dtype.
struct PositivePart : Function<PositivePart> {
  static inline Tensor mask_gradient;
  static variable_list forward(AutogradContext* ctx, const Tensor& x) {
    Tensor mask = x.gt(0.0).to(x.dtype());
    Tensor count = mask.sum().to(tg::kInt64);
    ctx->mark_non_differentiable({mask});
    ctx->save_for_backward({mask});
    return {x * mask, mask, count};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    mask_gradient = grad_outputs[1];
    return {grad_outputs[0] * ctx->get_saved_variables()[0]};
  }
};

TEST_CASE("non-differentiable outputs do not require grad and send zeros to backward", "[core][custom_function]") {
  Tensor x = tg::tensor({-2.0, 3.0, 0.5}, {3}, tg::kFloat64).requires_grad_();
  const variable_list out = PositivePart::apply(x);
  CHECK(out[0].requires_grad());
  CHECK_FALSE(out[1].requires_grad());
  CHECK_FALSE(out[2].requires_grad());
  CHECK(out[2].item<int64_t>() == 2);
  CHECK(out[1].grad_fn_name() == nullptr);
  CHECK_THROWS_WITH(out[1].sum().backward(), Contains("does not require grad"));
  (out[0] * 4.0).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{0.0, 4.0, 4.0});
  CHECK(values(PositivePart::mask_gradient) == std::vector<double>{0.0, 0.0, 0.0});
}

// x += y in place (through the raw values: forward runs with grad mode off), marked dirty.
struct AddInPlace : Function<AddInPlace> {
  static Tensor forward(AutogradContext* ctx, Tensor x, const Tensor& y) {
    double* xs = x.mutable_data<double>();
    const double* ys = y.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) xs[i] += ys[i];
    ctx->mark_dirty({x});
    return x;
  }
  static variable_list backward(AutogradContext*, variable_list grad_outputs) {
    return {grad_outputs[0], grad_outputs[0]};
  }
};

TEST_CASE("mark_dirty: the input itself is the output, its history continues from the node, its version moves",
          "[core][custom_function]") {
  Tensor a = tg::tensor({1.0, 2.0}, {2}, tg::kFloat64).requires_grad_();
  Tensor y = tg::tensor({10.0, 20.0}, {2}, tg::kFloat64).requires_grad_();
  Tensor x = a * 3.0;
  const Tensor squared = x * x;  // saves x at its version before the in-place add
  const Tensor out = AddInPlace::apply(x, y);
  CHECK(out.data<double>() == x.data<double>());
  CHECK(std::string(x.grad_fn_name()) == "AddInPlaceBackward");  // the caller's handle, rebased
  CHECK(values(x) == std::vector<double>{13.0, 26.0});
  // The product saved x before the write: its backward refuses it.
  CHECK_THROWS_WITH(squared.sum().backward(), Contains("MulBackward") && Contains("modified by an in-place operation"));
  CHECK_FALSE(a.grad().defined());
  // d(3a + y)/da = 3, d/dy = 1, weighted by [1, 2]
  (x * tg::tensor({1.0, 2.0}, {2}, tg::kFloat64)).sum().backward();
  CHECK(values(a.grad()) == std::vector<double>{3.0, 6.0});
  CHECK(values(y.grad()) == std::vector<double>{1.0, 2.0});
}

TEST_CASE("mark_dirty's misuses are errors", "[core][custom_function]") {
  Tensor y = tg::tensor({1.0}, {1}, tg::kFloat64);
  SECTION("a leaf that requires grad") {
    Tensor leaf = tg::tensor({1.0}, {1}, tg::kFloat64).requires_grad_();
    CHECK_THROWS_WITH(AddInPlace::apply(leaf, y), Contains("AddInPlaceBackward") && Contains("leaf that requires grad"));
  }
  SECTION("the same leaf under NoGradGuard is written, with nothing recorded") {
    Tensor leaf = tg::tensor({1.0}, {1}, tg::kFloat64).requires_grad_();
    const tg::NoGradGuard no_grad;
    const Tensor out = AddInPlace::apply(leaf, y);
    CHECK(values(leaf) == std::vector<double>{2.0});
    CHECK(leaf.is_leaf());
  }
  SECTION("a dirty tensor that is not returned") {
    struct Forgets : Function<Forgets> {
      static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        ctx->mark_dirty({x});
        return x * 2.0;
      }
      static variable_list backward(AutogradContext*, variable_list g) { return {g[0] * 2.0}; }
    };
    Tensor x = tg::tensor({1.0}, {1}, tg::kFloat64).requires_grad_() * 1.0;
    CHECK_THROWS_WITH(Forgets::apply(x), Contains("ForgetsBackward") && Contains("not returned"));
  }
  SECTION("a tensor that is not an input") {
    struct DirtyOther : Function<DirtyOther> {
      static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        Tensor other = x * 2.0;
        ctx->mark_dirty({other});
        return other;
      }
      static variable_list backward(AutogradContext*, variable_list g) { return {g[0] * 2.0}; }
    };
    Tensor x = tg::tensor({1.0}, {1}, tg::kFloat64).requires_grad_();
    CHECK_THROWS_WITH(DirtyOther::apply(x), Contains("DirtyOtherBackward") && Contains("not an input"));
  }
}

// Records needs_input_grad in forward and backward, and returns a gradient of the wrong shape for
// the second input (which must be ignored when that input needs none, as libtorch does).
struct NeedsGrad : Function<NeedsGrad> {
  static inline std::vector<bool> in_forward, in_backward;
  static Tensor forward(AutogradContext* ctx, const Tensor& a, int64_t unused, const Tensor& b) {
    (void)unused;
    in_forward = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return a * b;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    in_backward = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return {grad_outputs[0] * 2.0, Tensor(), tg::zeros({7}, tg::kFloat32)};
  }
};

TEST_CASE("needs_input_grad counts the tensor arguments; a gradient for an input that needs none is ignored",
          "[core][custom_function]") {
  Tensor a = tg::tensor({1.0, 2.0}, {2}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({3.0, 4.0}, {2}, tg::kFloat64);
  const Tensor out = NeedsGrad::apply(a, int64_t{5}, b);
  CHECK(NeedsGrad::in_forward == std::vector<bool>{true, false});
  out.sum().backward();
  CHECK(NeedsGrad::in_backward == std::vector<bool>{true, false});
  CHECK(values(a.grad()) == std::vector<double>{2.0, 2.0});
  CHECK_THROWS_WITH(NeedsGrad::apply(a, int64_t{5}, b.requires_grad_()).sum().backward(),
                    Contains("NeedsGradBackward") && Contains("float32") && Contains("float64 [2]"));
}

// Backward returns what the test asks for.
struct Returns : Function<Returns> {
  static inline variable_list to_return;
  static Tensor forward(AutogradContext*, const Tensor& x, double) { return x * 1.0; }
  static variable_list backward(AutogradContext*, variable_list) { return to_return; }
};

TEST_CASE("what backward returns is checked: count, shape, dtype, non-tensor slots", "[core][custom_function]") {
  Tensor x = tg::tensor({1.0, 2.0, 3.0}, {3}, tg::kFloat64).requires_grad_();
  SECTION("too few") {
    Returns::to_return = {tg::ones({3}, tg::kFloat64)};
    CHECK_THROWS_WITH(Returns::apply(x, 1.0).sum().backward(),
                      Contains("ReturnsBackward") && Contains("returned 1 gradients, expected 2"));
  }
  SECTION("too many, unless the extra ones are undefined") {
    Returns::to_return = {tg::ones({3}, tg::kFloat64), Tensor(), tg::ones({3}, tg::kFloat64)};
    CHECK_THROWS_WITH(Returns::apply(x, 1.0).sum().backward(), Contains("returned 3 gradients, expected 2"));
    Returns::to_return = {tg::ones({3}, tg::kFloat64), Tensor(), Tensor()};
    Returns::apply(x, 1.0).sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{1.0, 1.0, 1.0});
  }
  SECTION("a wrong shape") {
    Returns::to_return = {tg::ones({2, 3}, tg::kFloat64), Tensor()};
    CHECK_THROWS_WITH(Returns::apply(x, 1.0).sum().backward(),
                      Contains("ReturnsBackward") && Contains("[2, 3]") && Contains("float64 [3]"));
  }
  SECTION("a wrong dtype") {
    Returns::to_return = {tg::ones({3}, tg::kFloat32), Tensor()};
    CHECK_THROWS_WITH(Returns::apply(x, 1.0).sum().backward(),
                      Contains("ReturnsBackward") && Contains("float32") && Contains("float64 [3]"));
  }
  SECTION("a gradient for the double argument") {
    Returns::to_return = {tg::ones({3}, tg::kFloat64), tg::ones({}, tg::kFloat64)};
    CHECK_THROWS_WITH(Returns::apply(x, 1.0).sum().backward(),
                      Contains("ReturnsBackward") && Contains("argument 1") && Contains("not a tensor"));
  }
}

TEST_CASE("under NoGradGuard, or with no input requiring grad, apply runs forward only", "[core][custom_function]") {
  Tensor x = tg::tensor({1.0, 2.0}, {2}, tg::kFloat64).requires_grad_();
  Tensor shift = tg::zeros({2}, tg::kFloat64);
  const int64_t before = tg::autograd::live_nodes();
  {
    const tg::NoGradGuard no_grad;
    const Tensor y = ScaleShiftTanh::apply(x, 1.0, shift);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn_name() == nullptr);
    CHECK(values(y)[1] == Approx(std::tanh(2.0)).epsilon(1e-15));
    CHECK(tg::autograd::live_nodes() == before);
  }
  const Tensor y = ScaleShiftTanh::apply(x.detach(), 1.0, shift);
  CHECK_FALSE(y.requires_grad());
  CHECK(tg::autograd::live_nodes() == before);
}

struct Identity : Function<Identity> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0] * 10.0}; }
};

TEST_CASE("an input returned as it is comes back as a new tensor with the node's history", "[core][custom_function]") {
  Tensor x = tg::tensor({1.0, 2.0}, {2}, tg::kFloat64).requires_grad_();
  const Tensor y = Identity::apply(x);
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.data<double>() == x.data<double>());  // same bytes
  y.sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{10.0, 10.0});
}

// Tensor lists and optional tensors: each element of a list is one input and one gradient slot.
struct WeightedSum : Function<WeightedSum> {
  static Tensor forward(AutogradContext* ctx, const std::vector<Tensor>& parts, const std::optional<Tensor>& weight) {
    ctx->saved_data["weighted"] = weight.has_value();
    ctx->saved_data["count"] = static_cast<int64_t>(parts.size());
    Tensor sum = parts[0] * 1.0;
    for (size_t i = 1; i < parts.size(); ++i) sum = sum + parts[i];
    return weight ? sum * *weight : sum;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const int64_t count = ctx->saved_data["count"].toInt();
    variable_list grads(static_cast<size_t>(count), g[0]);
    if (ctx->saved_data["weighted"].toBool()) {
      for (Tensor& grad : grads) grad = grad * 2.0;  // the test's weight is 2
      grads.push_back(Tensor());                     // no gradient for the weight
    } else {
      grads.push_back(Tensor());  // the absent optional is a non-tensor slot
    }
    return grads;
  }
};

TEST_CASE("a std::vector<Tensor> argument is one input per element; an absent optional is not a tensor",
          "[core][custom_function]") {
  Tensor a = tg::tensor({1.0}, {1}, tg::kFloat64).requires_grad_();
  Tensor b = tg::tensor({2.0}, {1}, tg::kFloat64).requires_grad_();
  WeightedSum::apply(std::vector<Tensor>{a, b}, std::optional<Tensor>(tg::full({1}, 2.0, tg::kFloat64))).backward(
      tg::ones({1}, tg::kFloat64));
  CHECK(values(a.grad()) == std::vector<double>{2.0});
  WeightedSum::apply(std::vector<Tensor>{a, b}, std::optional<Tensor>()).sum().backward();
  CHECK(values(b.grad()) == std::vector<double>{3.0});
}

// y = x³ with a backward written in tg operations: 3x² · g, so that a recorded backward can be
// differentiated again (6x).
struct Cube : Function<Cube> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * 3.0 * x * x};
  }
};

// y = eˣ with the OUTPUT saved: the second derivative (eˣ) exists only if the saved output comes
// back connected to the graph in a recorded backward.
struct Exp : Function<Exp> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) { return {g[0] * ctx->get_saved_variables()[0]}; }
};

TEST_CASE("second derivatives through a custom function (create_graph)", "[core][custom_function]") {
  Tensor x = tg::tensor({-1.5, 0.5, 2.0}, {3}, tg::kFloat64).requires_grad_();
  const Tensor ones = tg::ones({3}, tg::kFloat64);
  SECTION("a saved input: d²(x³)/dx² = 6x") {
    const Tensor y = Cube::apply(x);
    const Tensor dy = tg::autograd::grad({y}, {x}, {ones}, recorded())[0];
    REQUIRE(dy.requires_grad());
    CHECK(values(dy) == std::vector<double>{6.75, 0.75, 12.0});
    const Tensor d2y = tg::autograd::grad({dy}, {x}, {ones})[0];
    CHECK(values(d2y) == std::vector<double>{-9.0, 3.0, 12.0});
  }
  SECTION("a saved output: d²(eˣ)/dx² = eˣ") {
    const Tensor y = Exp::apply(x);
    const Tensor dy = tg::autograd::grad({y}, {x}, {ones}, recorded())[0];
    const Tensor d2y = tg::autograd::grad({dy}, {x}, {ones})[0];
    for (size_t i = 0; i < 3; ++i) CHECK(values(d2y)[i] == Approx(std::exp(values(x)[i])).epsilon(1e-15));
  }
  SECTION("backward(create_graph) then backward of the gradient") {
    const Tensor y = Cube::apply(x).sum();
    y.backward(create_graph());
    const Tensor g = x.grad();
    x.set_grad(Tensor());
    g.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{-9.0, 3.0, 12.0});
  }
}

// Cube with its backward run outside autograd (under NoGradGuard): right first derivatives, but a
// gradient that cannot be differentiated again.
struct UnrecordedCube : Function<UnrecordedCube> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) { return Cube::forward(ctx, x); }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const tg::NoGradGuard no_grad;
    return Cube::backward(ctx, std::move(g));
  }
};

TEST_CASE("a second backward through a custom function names the function and the call",
          "[core][custom_function]") {
  using Catch::Matchers::StartsWith;
  Tensor x = tg::tensor({-1.5, 0.5, 2.0}, {3}, tg::kFloat64).requires_grad_();
  const Tensor ones = tg::ones({3}, tg::kFloat64);
  SECTION("double backward through a backward that was not recorded") {
    const Tensor y = UnrecordedCube::apply(x);
    const Tensor dy = tg::autograd::grad({y}, {x}, {ones}, recorded())[0];
    CHECK(values(dy) == std::vector<double>{6.75, 0.75, 12.0});
    CHECK_THROWS_WITH(tg::autograd::grad({dy}, {x}, {ones}),
                      StartsWith("autograd::grad: the backward of UnrecordedCubeBackward is not differentiable"));
    UnrecordedCube::apply(x).sum().backward(create_graph());
    const Tensor g = x.grad();
    x.set_grad(Tensor());
    CHECK_THROWS_WITH(g.sum().backward(),
                      StartsWith("backward: the backward of UnrecordedCubeBackward is not differentiable"));
  }
  SECTION("a recorded backward is not marked: its second derivative is 6x") {
    const Tensor dy = tg::autograd::grad({Cube::apply(x)}, {x}, {ones}, recorded())[0];
    CHECK(values(tg::autograd::grad({dy}, {x}, {ones})[0]) == std::vector<double>{-9.0, 3.0, 12.0});
  }
  SECTION("backward twice without retain_graph") {
    const Tensor y = Cube::apply(x);
    y.backward(ones);
    CHECK_THROWS_WITH(y.backward(ones), StartsWith("backward: trying to backward through CubeBackward a second time"));
    const Tensor z = Cube::apply(x);
    tg::autograd::grad({z}, {x}, {ones});
    CHECK_THROWS_WITH(tg::autograd::grad({z}, {x}, {ones}),
                      StartsWith("autograd::grad: trying to backward through CubeBackward a second time"));
  }
}

TEST_CASE("a node that saved its output is freed with its outputs (the output is not kept by the node)",
          "[core][custom_function]") {
  Tensor x = tg::tensor({0.5, 1.0}, {2}, tg::kFloat64).requires_grad_();
  const int64_t before = tg::autograd::live_nodes();
  {
    const Tensor y = Exp::apply(x);
    CHECK(tg::autograd::live_nodes() == before + 1);
  }
  CHECK(tg::autograd::live_nodes() == before);
  {
    const Tensor y = Exp::apply(x);
    y.sum().backward(retain_graph());
  }
  CHECK(tg::autograd::live_nodes() == before);
}

TEST_CASE("a hook on one output of a custom function", "[core][custom_function]") {
  Tensor x = tg::tensor({0.0, 1.0}, {2}, tg::kFloat64).requires_grad_();
  const variable_list out = ExpAndSquare::apply(x, true);
  std::vector<double> seen;
  out[1].register_hook([&](const Tensor& grad) {
    seen = values(grad);
    return grad * 10.0;
  });
  (out[0] + out[1]).sum().backward();
  CHECK(seen == std::vector<double>{1.0, 1.0});
  // eˣ + 10 · 2x
  CHECK(values(x.grad())[1] == Approx(std::exp(1.0) + 20.0).epsilon(1e-15));
}

struct Log : Function<Log> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x.log();
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) { return {g[0] / ctx->get_saved_variables()[0]}; }
};

TEST_CASE("anomaly mode names the custom function and where it was recorded", "[core][custom_function]") {
  const tg::DetectAnomalyGuard detect;
  Tensor x = tg::tensor({1.0, 0.0}, {2}, tg::kFloat64).requires_grad_();
  Tensor y;
  {
    const tg::AnomalyTag tag("my layer");
    y = Log::apply(x);
  }
  CHECK_THROWS_WITH((y * 0.0).sum().backward(),
                    Contains("LogBackward") && Contains("NaN") && Contains("my layer"));
}

TEST_CASE("saved tensors are checked against their version; a second backward needs retain_graph",
          "[core][custom_function]") {
  Tensor a = tg::tensor({1.0, 2.0}, {2}, tg::kFloat64).requires_grad_();
  SECTION("an input modified after forward saved it") {
    Tensor x = a * 1.0;
    const Tensor y = Cube::apply(x);
    {
      const tg::NoGradGuard no_grad;
      x.fill_(5.0);
    }
    CHECK_THROWS_WITH(y.sum().backward(), Contains("CubeBackward") && Contains("modified by an in-place operation"));
  }
  SECTION("twice") {
    const Tensor y = Cube::apply(a).sum();
    y.backward(retain_graph());
    y.backward();
    CHECK(values(a.grad()) == std::vector<double>{6.0, 24.0});
    CHECK_THROWS_WITH(y.backward(), Contains("second time"));
  }
}

// Throws from backward while `armed`.
struct Fragile : Function<Fragile> {
  static inline bool armed = true;
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2.0; }
  static variable_list backward(AutogradContext*, variable_list g) {
    if (armed) throw std::runtime_error("user backward failed");
    return {g[0] * 2.0};
  }
};

TEST_CASE("an exception thrown by a user's backward leaves the graph usable or cleanly freed",
          "[core][custom_function]") {
  Tensor x = tg::tensor({1.0, 2.0}, {2}, tg::kFloat64).requires_grad_();
  x.set_grad(tg::tensor({100.0, 100.0}, {2}, tg::kFloat64));
  const int64_t before = tg::autograd::live_nodes();
  Fragile::armed = true;
  SECTION("the function ran first: nothing was released, a retry runs the whole graph") {
    const Tensor y = Fragile::apply(x * 3.0);
    CHECK_THROWS_WITH(y.backward(tg::ones({2}, tg::kFloat64)), Contains("user backward failed"));
    CHECK(values(x.grad()) == std::vector<double>{100.0, 100.0});
    Fragile::armed = false;
    y.backward(tg::ones({2}, tg::kFloat64));
    CHECK(values(x.grad()) == std::vector<double>{106.0, 106.0});
  }
  SECTION("after nodes that ran: leaf gradients restored, a retry says the pass failed, the graph is freed") {
    {
      const Tensor y = (Fragile::apply(x) * 3.0).sum();
      CHECK_THROWS_WITH(y.backward(), Contains("user backward failed"));
      CHECK(values(x.grad()) == std::vector<double>{100.0, 100.0});
      Fragile::armed = false;
      CHECK_THROWS_WITH(y.backward(), Contains("failed"));
    }
    CHECK(tg::autograd::live_nodes() == before);
  }
  SECTION("with retain_graph the whole graph stays usable") {
    const Tensor y = (Fragile::apply(x) * 3.0).sum();
    CHECK_THROWS_WITH(y.backward(retain_graph()), Contains("user backward failed"));
    Fragile::armed = false;
    y.backward();
    CHECK(values(x.grad()) == std::vector<double>{106.0, 106.0});
  }
  Fragile::armed = true;
}

namespace inner {
struct Square : Function<Square> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * x; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};
}  // namespace inner

TEST_CASE("the node's name drops namespaces", "[core][custom_function]") {
  Tensor x = tg::tensor({1.0}, {1}, tg::kFloat64).requires_grad_();
  CHECK(std::string(inner::Square::apply(x).grad_fn_name()) == "SquareBackward");
}

TEST_CASE("IValue holds what saved_data stores and refuses the wrong accessor", "[core][custom_function]") {
  const tg::IValue d = 2.5, i = 3, b = true, s = "name", t = tg::ones({2}), shape = tg::Shape{2, 3},
                   ds = std::vector<double>{0.5, 1.5};
  CHECK(d.toDouble() == 2.5);
  CHECK(i.toInt() == 3);
  CHECK(b.toBool());
  CHECK(s.toString() == "name");
  CHECK(t.toTensor().numel() == 2);
  CHECK(shape.toIntVector() == std::vector<int64_t>{2, 3});
  CHECK(ds.toDoubleVector() == std::vector<double>{0.5, 1.5});
  CHECK(tg::IValue().isNone());
  CHECK(std::string(b.tagKind()) == "Bool");
  CHECK_THROWS_WITH(i.toDouble(), Contains("toDouble") && Contains("Double") && Contains("Int"));
  CHECK_THROWS_AS(s.toTensor(), tg::Error);
}

}  // namespace
