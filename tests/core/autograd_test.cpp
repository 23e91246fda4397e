// Tape semantics: when grads exist, how they accumulate and reset, NoGradGuard, detach, handle
// sharing, and the errors of a second backward.
#include "core_test_util.hpp"

using tg::Tensor;

TEST_CASE("grad is undefined until a backward reaches the leaf", "[core][autograd]") {
  Tensor w = tg::ones({2}, tg::kFloat64).requires_grad_();
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
  CHECK_FALSE(w.grad().defined());
  Tensor unused = tg::ones({2}, tg::kFloat64).requires_grad_();
  (w * 3.0).sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3, 3});
  CHECK_FALSE(unused.grad().defined());
}

TEST_CASE("gradients accumulate over backward calls until reset", "[core][autograd]") {
  Tensor w = tg::tensor({1, 2}, {}, tg::kFloat64).requires_grad_();
  const auto loss = [&] { return (w * w).sum(); };  // d/dw = 2w
  loss().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 4});
  loss().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{4, 8});
  w.set_grad(Tensor());
  CHECK_FALSE(w.grad().defined());
  loss().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 4});
  w.set_grad(tg::full({2}, 10.0, tg::kFloat64));
  loss().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{12, 14});
}

TEST_CASE("accumulation does not write into a gradient tensor the caller holds", "[core][autograd]") {
  Tensor w = tg::ones({2}, tg::kFloat64).requires_grad_();
  w.sum().backward();
  const Tensor first = w.grad();
  w.sum().backward();
  CHECK(first.to_vector<double>() == std::vector<double>{1, 1});
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 2});
}

TEST_CASE("a leaf used twice in one graph receives the summed gradient", "[core][autograd]") {
  Tensor x = tg::tensor({3, -1}, {}, tg::kFloat64).requires_grad_();
  // y = x * x + 2 x + x  -> dy/dx = 2x + 3
  (x * x + 2.0 * x + x).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{9, 1});
}

TEST_CASE("a shared intermediate sends the sum of its branches' gradients", "[core][autograd]") {
  Tensor x = tg::tensor({2}, {}, tg::kFloat64).requires_grad_();
  const Tensor h = x.exp();
  // (h + h²) -> d/dx = e^x + 2 e^{2x}
  (h + h.pow(2)).sum().backward();
  CHECK(x.grad().item() == Approx(std::exp(2.0) + 2 * std::exp(4.0)).epsilon(1e-14));
}

TEST_CASE("backward on a leaf and on a non-scalar with grad_output", "[core][autograd]") {
  Tensor x = tg::tensor({5}, {}, tg::kFloat64).requires_grad_();
  x.backward();
  CHECK(x.grad().item() == 1.0);
  Tensor y = tg::tensor({1, 2, 3}, {}, tg::kFloat64).requires_grad_();
  (y * y).backward(tg::tensor({1, 10, 100}, {}, tg::kFloat64));
  CHECK(y.grad().to_vector<double>() == std::vector<double>{2, 40, 600});
}

TEST_CASE("NoGradGuard records nothing and nests", "[core][autograd]") {
  Tensor w = tg::ones({3, 3}).requires_grad_();
  const int64_t before = tg::autograd::live_nodes();
  CHECK(tg::is_grad_enabled());
  {
    tg::NoGradGuard no_grad;
    CHECK_FALSE(tg::is_grad_enabled());
    const Tensor y = (tg::matmul(w, w) * 2.0 + w).relu().sum({0});
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn_name() == nullptr);
    CHECK(tg::autograd::live_nodes() == before);
    {
      tg::NoGradGuard inner;
      CHECK_FALSE(tg::is_grad_enabled());
    }
    CHECK_FALSE(tg::is_grad_enabled());
  }
  CHECK(tg::is_grad_enabled());
  const Tensor z = w * 2.0;
  CHECK(z.requires_grad());
  CHECK(z.grad_fn_name() != nullptr);
  CHECK(tg::autograd::live_nodes() > before);
}

TEST_CASE("ops on tensors that need no grad record nothing", "[core][autograd]") {
  const int64_t before = tg::autograd::live_nodes();
  const Tensor y = (tg::ones({4}) * 3.0).exp().sum();
  CHECK_FALSE(y.requires_grad());
  CHECK(tg::autograd::live_nodes() == before);
}

TEST_CASE("detach cuts the graph but shares storage", "[core][autograd]") {
  Tensor x = tg::tensor({1, 2}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = x * 3.0;
  Tensor d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.data<double>() == y.data<double>());
  d.mutable_data<double>()[0] = 42.0;
  CHECK(y.to_vector<double>()[0] == 42.0);
  // Gradient does not flow through the detached branch.
  (y + d * 100.0).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
}

TEST_CASE("copies of a Tensor handle share storage and grad", "[core][autograd]") {
  Tensor a = tg::zeros({2}, tg::kFloat64).requires_grad_();
  Tensor b = a;  // NOLINT: a handle copy on purpose
  CHECK(b.is_same(a));
  (b * 2.0).sum().backward();
  REQUIRE(a.grad().defined());
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 2});
  {
    tg::NoGradGuard no_grad;
    b.fill_(5.0);
  }
  CHECK(a.to_vector<double>() == std::vector<double>{5, 5});
  a.set_grad(Tensor());
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("set_grad works through a const handle, like PyTorch's .grad =", "[core][autograd]") {
  Tensor a = tg::zeros({2}, tg::kFloat64).requires_grad_();
  const Tensor handle = a;  // a const handle to the same tensor
  handle.set_grad(tg::tensor({1, 2}, {}, tg::kFloat64));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1, 2});
  // A const reference, as a function taking parameters by const& holds them.
  const auto reset = [](const Tensor& parameter) { parameter.set_grad(Tensor()); };
  reset(a);
  CHECK_FALSE(handle.grad().defined());
  // The same checks as through a mutable handle.
  REQUIRE_TG_ERROR(handle.set_grad(tg::zeros({3}, tg::kFloat64)), Catch::Contains("set_grad") && Catch::Contains("[3]"));
}

TEST_CASE("a second backward through a released graph is a clear tg::Error", "[core][autograd]") {
  Tensor x = tg::ones({2}, tg::kFloat64).requires_grad_();
  const Tensor y = (x * 2.0).exp();
  const Tensor loss = y.sum();
  loss.backward();
  REQUIRE_THROWS_AS(loss.backward(), tg::Error);
  REQUIRE_THROWS_WITH(loss.backward(), Catch::Contains("backward") && Catch::Contains("second time"));
  // A new root over the released part of the graph fails the same way, before touching any grad.
  const Tensor before = x.grad().clone();
  REQUIRE_THROWS_WITH(y.mean().backward(), Catch::Contains("second time"));
  CHECK(x.grad().to_vector<double>() == before.to_vector<double>());
  // A fresh forward pass works again.
  (x * 2.0).exp().sum().backward();
  CHECK(x.grad().to_vector<double>()[0] == Approx(2 * 2 * std::exp(2.0)).epsilon(1e-14));
}

TEST_CASE("backward frees the graph's saved tensors and nodes", "[core][autograd]") {
  const int64_t baseline = tg::autograd::live_nodes();
  Tensor x = tg::ones({3}, tg::kFloat64).requires_grad_();
  {
    const Tensor loss = (x * 2.0 + 1.0).pow(2).mean();
    CHECK(tg::autograd::live_nodes() > baseline);
    loss.backward();
  }
  CHECK(tg::autograd::live_nodes() == baseline);
}

TEST_CASE("requires_grad_ only on leaves, to() and clone() are differentiable", "[core][autograd]") {
  Tensor x = tg::tensor({1, 2}, {}, tg::kFloat32).requires_grad_();
  const Tensor y = x * 2.0;
  CHECK_FALSE(y.is_leaf());
  REQUIRE_THROWS_AS(Tensor(y).requires_grad_(false), tg::Error);
  const Tensor z = (x.to(tg::kFloat64) * x.clone().to(tg::kFloat64)).sum();
  CHECK(z.dtype() == tg::kFloat64);
  z.backward();
  CHECK(x.grad().dtype() == tg::kFloat32);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE("a long chain of operations is freed without deep recursion", "[core][autograd]") {
  const int64_t baseline = tg::autograd::live_nodes();
  Tensor x = tg::ones({1}, tg::kFloat64).requires_grad_();
  {
    Tensor y = x;
    for (int i = 0; i < 200000; ++i) y = y * 1.0;
    CHECK(tg::autograd::live_nodes() >= baseline + 200000);
  }
  CHECK(tg::autograd::live_nodes() == baseline);
}
