// Tensor hooks, checked against PyTorch's documented semantics:
// Tensor.register_hook — "called every time a gradient with respect to the Tensor is computed ...
// can return a new gradient which will be used in place of grad"; hooks run in registration order;
// Tensor.register_post_accumulate_grad_hook — "called after the gradient has been accumulated
// into the tensor's .grad", leaves only; the returned handle's remove() unregisters.
#include <string>
#include <vector>

#include "core_test_util.hpp"
#include "tapegrad/parallel.hpp"

using tg::Tensor;
using Catch::Matchers::Contains;

TEST_CASE("a leaf's hook may replace its gradient before it is accumulated", "[core][hooks]") {
  Tensor w = tg::tensor({1, 2}, {}, tg::kFloat64).requires_grad_();
  std::vector<double> seen;
  w.register_hook([&](const Tensor& grad) {
    seen = grad.to_vector<double>();
    return grad * 2.0;
  });
  (w * 3.0).sum().backward();
  CHECK(seen == std::vector<double>{3, 3});                          // d/dw (3w) = 3
  CHECK(w.grad().to_vector<double>() == std::vector<double>{6, 6});  // the replacement was accumulated
}

TEST_CASE("a hook on an intermediate changes what flows to the leaves", "[core][hooks]") {
  Tensor x = tg::tensor({2}, {}, tg::kFloat64).requires_grad_();
  const Tensor h = x * x;
  h.register_hook([](const Tensor& grad) { return grad * 10.0; });
  (h * 1.0).sum().backward();
  CHECK(x.grad().item() == 40.0);  // 10 · dh/dx = 10 · 2x
}

TEST_CASE("hooks run in registration order, see the sum of all branches, and remove() unregisters",
          "[core][hooks]") {
  Tensor x = tg::tensor({1}, {}, tg::kFloat64).requires_grad_();
  std::string order;
  tg::HookHandle plus_one = x.register_hook([&](const Tensor& grad) {
    order += "a";
    return grad + 1.0;
  });
  x.register_hook([&](const Tensor& grad) {
    order += "b";
    return grad * 2.0;
  });
  x.register_hook([&](const Tensor&) {  // an undefined result keeps the gradient
    order += "c";
    return Tensor();
  });
  (x * 2.0 + x * 3.0).sum().backward();  // x is used twice; its hooks see the total 5, once
  CHECK(order == "abc");
  CHECK(x.grad().item() == 12.0);  // (5 + 1) · 2
  plus_one.remove();
  plus_one.remove();  // a second remove does nothing
  x.set_grad(Tensor());
  order.clear();
  (x * 2.0 + x * 3.0).sum().backward();
  CHECK(order == "bc");
  CHECK(x.grad().item() == 10.0);
}

TEST_CASE("a hook returning the wrong shape is a tg::Error", "[core][hooks][errors]") {
  Tensor x = tg::ones({3}, tg::kFloat64).requires_grad_();
  x.register_hook([](const Tensor&) { return tg::ones({2}, tg::kFloat64); });
  REQUIRE_THROWS_WITH((x * 2.0).sum().backward(), Contains("hook") && Contains("[3]") && Contains("[2]"));
  CHECK_FALSE(x.grad().defined());
  REQUIRE_THROWS_WITH(tg::ones({2}).register_hook([](const Tensor& g) { return g; }),
                      Contains("register_hook") && Contains("does not require grad"));
}

TEST_CASE("the post-accumulate hook fires once per backward, with the final grad in place", "[core][hooks]") {
  Tensor x = tg::tensor({3}, {}, tg::kFloat64).requires_grad_();
  std::vector<double> grads_seen;
  tg::HookHandle handle = x.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    grads_seen.push_back(leaf.grad().item());  // the leaf itself is passed, as in PyTorch
  });
  (x * x + x).sum().backward();  // three uses of x, one accumulation: 2x + 1 = 7
  CHECK(grads_seen == std::vector<double>{7});
  (x * 2.0).sum().backward();  // gradients accumulate across passes: 7 + 2
  CHECK(grads_seen == std::vector<double>{7, 9});
  handle.remove();
  (x * 2.0).sum().backward();
  CHECK(grads_seen.size() == 2);
  REQUIRE_THROWS_WITH((x * 2.0).register_post_accumulate_grad_hook([](const Tensor&) {}),
                      Contains("register_post_accumulate_grad_hook") && Contains("computed by an operation"));
}

TEST_CASE("one accumulator per leaf: a hook registered before the graph was built still fires",
          "[core][hooks]") {
  Tensor w = tg::ones({2}, tg::kFloat64).requires_grad_();
  const Tensor loss_a = (w * 2.0).sum();  // recorded before the hook exists
  int fired = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++fired; });
  const Tensor loss_b = (w * 5.0).sum();
  loss_a.backward();
  loss_b.backward();
  CHECK(fired == 2);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{7, 7});
}

TEST_CASE("post-accumulate hooks fire in the same order at any thread count", "[core][hooks][threads]") {
  const auto firing_order = [](int threads) {
    tg::set_num_threads(threads);
    tg::manual_seed(5);
    std::vector<Tensor> params;
    for (int i = 0; i < 6; ++i) params.push_back(tg::randn({64, 64}, tg::kFloat64).requires_grad_());
    std::vector<int> order;
    for (int i = 0; i < 6; ++i)
      params[static_cast<size_t>(i)].register_post_accumulate_grad_hook([&order, i](const Tensor&) { order.push_back(i); });
    Tensor h = tg::ones({8, 64}, tg::kFloat64);
    for (const Tensor& p : params) h = tg::matmul(h, p).relu() + h;
    h.sum().backward();
    return order;
  };
  const int threads_before = tg::get_num_threads();
  const std::vector<int> serial = firing_order(1);
  CHECK(serial.size() == 6);
  CHECK(firing_order(4) == serial);
  CHECK(serial == std::vector<int>{5, 4, 3, 2, 1, 0});  // the last layer's gradient is final first
  tg::set_num_threads(threads_before);
}
