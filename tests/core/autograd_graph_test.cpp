// Graph control: retain_graph, create_graph, backward's inputs, retain_grad, and autograd::grad
// (gradients returned, not accumulated; unused inputs; several outputs). Values by hand.
#include "core_test_util.hpp"

#include <tapegrad/autograd/grad.hpp>

using tg::Tensor;

namespace {
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
Tensor vec(std::initializer_list<double> v) { return tg::tensor(v, {}, tg::kFloat64); }
}  // namespace

TEST_CASE("retain_graph keeps the graph for a second backward, which accumulates", "[core][autograd][graph]") {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = x * x;  // dy/dx = 2x
  const Tensor seed = vec({1, 1, 1});
  y.backward(seed, {.retain_graph = true});
  CHECK(values(x.grad()) == std::vector<double>{2, 4, 6});
  y.backward(seed);  // the graph is still there; this one frees it
  CHECK(values(x.grad()) == std::vector<double>{4, 8, 12});
  CHECK_THROWS_WITH(y.backward(seed), Catch::Contains("retain_graph"));
}

TEST_CASE("autograd::grad returns gradients and leaves .grad alone", "[core][autograd][graph]") {
  Tensor a = vec({1, 2}).requires_grad_();
  Tensor b = vec({3, 5}).requires_grad_();
  Tensor y = a * b;
  const std::vector<Tensor> grads = tg::autograd::grad({y}, {a, b}, {vec({1, 10})});
  REQUIRE(grads.size() == 2);
  CHECK(values(grads[0]) == std::vector<double>{3, 50});  // g · b
  CHECK(values(grads[1]) == std::vector<double>{1, 20});  // g · a
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  CHECK_FALSE(grads[0].requires_grad());
  // The graph was freed (retain_graph defaults to create_graph = false).
  CHECK_THROWS_WITH(tg::autograd::grad({y}, {a}, {vec({1, 1})}), Catch::Contains("second time"));
}

TEST_CASE("autograd::grad of an intermediate, with only the needed nodes run", "[core][autograd][graph]") {
  Tensor x = vec({2, 3}).requires_grad_();
  Tensor w = vec({7, 7}).requires_grad_();
  Tensor h = x * w;  // non-leaf input
  Tensor y = h * h;  // dy/dh = 2h
  const std::vector<Tensor> grads = tg::autograd::grad({y}, {h}, {vec({1, 1})});
  CHECK(values(grads[0]) == std::vector<double>{28, 42});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("autograd::grad: unused inputs, allow_unused, materialize_grads", "[core][autograd][graph]") {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor unused = vec({5}).requires_grad_();
  const auto y = [&] { return x * x; };
  CHECK_THROWS_WITH(tg::autograd::grad({y()}, {x, unused}, {vec({1, 1})}),
                    Catch::Contains("inputs[1] (shape [1]) was not used"));
  std::vector<Tensor> grads = tg::autograd::grad({y()}, {x, unused}, {vec({1, 1})}, {.allow_unused = true});
  CHECK(values(grads[0]) == std::vector<double>{2, 4});
  CHECK_FALSE(grads[1].defined());
  grads = tg::autograd::grad({y()}, {x, unused}, {vec({1, 1})}, {.materialize_grads = true});
  CHECK(values(grads[1]) == std::vector<double>{0});
  Tensor constant = vec({1});
  CHECK_THROWS_WITH(tg::autograd::grad({y()}, {constant}, {vec({1, 1})}),
                    Catch::Contains("inputs[0] (shape [1]) does not require grad"));
  CHECK_THROWS_WITH(tg::autograd::grad({constant}, {x}), Catch::Contains("does not require grad"));
  CHECK_THROWS_WITH(tg::autograd::grad({y()}, {x}), Catch::Contains("one-element output"));
  CHECK_THROWS_WITH(tg::autograd::grad({y()}, {x}, {vec({1, 1, 1})}),
                    Catch::Contains("grad_output 0 of shape [3]"));
}

TEST_CASE("autograd::grad and autograd::backward over several outputs sum their contributions",
          "[core][autograd][graph]") {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor y1 = x * x;      // 2x
  Tensor y2 = x * 3.0;    // 3
  const std::vector<Tensor> grads = tg::autograd::grad({y1, y2}, {x}, {vec({1, 1}), vec({2, 2})}, {.retain_graph = true});
  CHECK(values(grads[0]) == std::vector<double>{2 + 6, 4 + 6});
  tg::autograd::backward({y1, y2}, {vec({1, 1}), vec({2, 2})});
  CHECK(values(x.grad()) == std::vector<double>{8, 10});
}

TEST_CASE("create_graph records the backward: a second derivative by hand", "[core][autograd][graph]") {
  Tensor x = vec({1, 2, 3}).requires_grad_();
  Tensor y = x * x * x;  // dy/dx = 3x², d²y/dx² = 6x
  const Tensor dx = tg::autograd::grad({y}, {x}, {vec({1, 1, 1})}, {.create_graph = true})[0];
  CHECK(values(dx) == std::vector<double>{3, 12, 27});
  REQUIRE(dx.requires_grad());
  const Tensor ddx = tg::autograd::grad({dx}, {x}, {vec({1, 1, 1})})[0];
  CHECK(values(ddx) == std::vector<double>{6, 12, 18});
  // Third: d³y/dx³ = 6. The second backward above ran through y's own nodes too (dx's graph
  // starts from them) and freed them, as PyTorch does: record y again.
  Tensor y2 = x * x * x;
  const Tensor dx2 = tg::autograd::grad({y2}, {x}, {vec({1, 1, 1})}, {.create_graph = true})[0];
  const Tensor ddx2 = tg::autograd::grad({dx2}, {x}, {vec({1, 1, 1})}, {.create_graph = true})[0];
  const Tensor dddx = tg::autograd::grad({ddx2}, {x}, {vec({1, 1, 1})})[0];
  CHECK(values(dddx) == std::vector<double>{6, 6, 6});
}

TEST_CASE("backward with create_graph gives leaves a differentiable grad", "[core][autograd][graph]") {
  Tensor x = vec({2, -1}).requires_grad_();
  Tensor y = x * x;
  y.backward(vec({1, 1}), {.create_graph = true});
  const Tensor g = x.grad();  // 2x, recorded
  REQUIRE(g.requires_grad());
  CHECK(values(g) == std::vector<double>{4, -2});
  // Gradient penalty style: d/dx of sum(g · g) = d/dx 4x² summed = 8x.
  const Tensor penalty = tg::autograd::grad({g * g}, {x}, {vec({1, 1})})[0];
  CHECK(values(penalty) == std::vector<double>{16, -8});
  // x.grad's graph holds x (as in PyTorch, which warns about it): resetting the gradient, as
  // zero_grad does, breaks the cycle.
  x.set_grad(Tensor());
}

TEST_CASE("create_graph inside a NoGradGuard is an error", "[core][autograd][graph]") {
  Tensor x = vec({1}).requires_grad_();
  Tensor y = x * x;
  tg::NoGradGuard no_grad;
  CHECK_THROWS_WITH(tg::autograd::grad({y}, {x}, {}, {.create_graph = true}),
                    Catch::Contains("NoGradGuard"));
}

TEST_CASE("backward's inputs: only those tensors get gradients, non-leaves included", "[core][autograd][graph]") {
  Tensor a = vec({1, 2}).requires_grad_();
  Tensor b = vec({3, 4}).requires_grad_();
  Tensor h = a * b;
  Tensor y = h * h;
  y.backward(vec({1, 1}), {.retain_graph = true, .inputs = {b}});
  CHECK_FALSE(a.grad().defined());
  CHECK(values(b.grad()) == std::vector<double>{2 * 3 * 1 * 1, 2 * 8 * 2});  // 2h · a
  y.backward(vec({1, 1}), {.inputs = {h}});
  CHECK(values(h.grad()) == std::vector<double>{6, 16});  // 2h
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("retain_grad keeps a non-leaf's gradient, accumulating", "[core][autograd][graph]") {
  Tensor x = vec({1, 2}).requires_grad_();
  Tensor h = x * 3.0;
  CHECK_FALSE(h.retains_grad());
  h.retain_grad();
  CHECK(h.retains_grad());
  Tensor y = h * h;  // dy/dh = 2h = 6x
  y.backward(vec({1, 1}), {.retain_graph = true});
  CHECK(values(h.grad()) == std::vector<double>{6, 12});
  CHECK(values(x.grad()) == std::vector<double>{18, 36});
  y.backward(vec({1, 1}));
  CHECK(values(h.grad()) == std::vector<double>{12, 24});
  // A hook registered on h runs before its gradient is retained.
  Tensor h2 = x * 1.0;
  h2.retain_grad();
  h2.register_hook([](const Tensor& g) { return g * 10.0; });
  (h2 * 1.0).backward(vec({1, 1}));
  CHECK(values(h2.grad()) == std::vector<double>{10, 10});
}

TEST_CASE("a double-backward graph frees what it saved as the first one does", "[core][autograd][graph]") {
  const int64_t before = tg::autograd::live_nodes();
  {
    Tensor x = vec({1, 2}).requires_grad_();
    Tensor y = x * x * x;
    Tensor dx = tg::autograd::grad({y}, {x}, {vec({1, 1})}, {.create_graph = true})[0];
    CHECK(tg::autograd::live_nodes() > before);
    // Without retain_graph the second backward frees every node it runs: the recorded backward's
    // and y's own, which dx's graph starts from.
    tg::autograd::grad({dx}, {x}, {vec({1, 1})}, {.retain_graph = true});
    tg::autograd::grad({dx}, {x}, {vec({1, 1})});
    CHECK_THROWS_WITH(tg::autograd::grad({dx}, {x}, {vec({1, 1})}), Catch::Contains("second time"));
    CHECK_THROWS_WITH(tg::autograd::grad({y}, {x}, {vec({1, 1})}), Catch::Contains("second time"));
  }
  CHECK(tg::autograd::live_nodes() == before);
}
