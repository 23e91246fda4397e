// The tape under misuse: tensors changed in place after they were saved, a backward that throws
// part-way, graphs too long to free recursively, a tensor made its own gradient, and grad() read
// from another thread while backward runs.
#include <pthread.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>

#include "core_test_util.hpp"

using tg::Tensor;
using Catch::Matchers::Contains;

namespace {

// Runs `body` on a thread whose stack is `stack_bytes`, so that a recursion proportional to the
// graph's length overflows here instead of passing on the main thread's 8 MiB. Returns false if
// `body` threw.
bool run_with_stack(size_t stack_bytes, const std::function<void()>& body) {
  struct Call {
    const std::function<void()>* body;
    bool ok = false;
  } call{&body};
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, stack_bytes);
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attributes,
      [](void* argument) -> void* {
        auto* c = static_cast<Call*>(argument);
        try {
          (*c->body)();
          c->ok = true;
        } catch (...) {
        }
        return nullptr;
      },
      &call);
  pthread_attr_destroy(&attributes);
  REQUIRE(created == 0);
  pthread_join(thread, nullptr);
  return call.ok;
}

}  // namespace

// --- 1. version counter ----------------------------------------------------------------------------

TEST_CASE("a saved input modified in place makes backward throw, naming the op and the shape",
          "[core][autograd][version]") {
  Tensor w = tg::ones({2, 3}, tg::kFloat64).requires_grad_();
  Tensor x = tg::full({2, 3}, 2.0, tg::kFloat64);
  const Tensor loss = (w * x).sum();  // MulBackward saves x for dw
  x.fill_(5.0);                       // x does not require grad: allowed, and now stale
  REQUIRE_THROWS_WITH(loss.backward(), Contains("backward") && Contains("MulBackward") &&
                                           Contains("[2, 3]") && Contains("modified by an in-place operation") &&
                                           Contains("version 2, expected version 1"));  // full() wrote x once
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("every in-place writer bumps the version of the storage, views included", "[core][autograd][version]") {
  using Write = std::function<void(Tensor&)>;
  const std::vector<std::pair<const char*, Write>> writers{
      {"fill_", [](Tensor& t) { t.fill_(3.0); }},
      {"zero_", [](Tensor& t) { t.zero_(); }},
      {"copy_", [](Tensor& t) { t.copy_(tg::full(t.shape(), 4.0, t.dtype())); }},
      {"uniform_", [](Tensor& t) { t.uniform_(0.0, 1.0); }},
      {"normal_", [](Tensor& t) { t.normal_(); }},
      {"a reshaped view's fill_", [](Tensor& t) {
         Tensor view = t.reshape({-1});
         view.fill_(1.0);
       }}};
  for (const auto& [what, write] : writers) {
    INFO(what);
    Tensor w = tg::ones({4}, tg::kFloat64).requires_grad_();
    Tensor x = tg::full({4}, 2.0, tg::kFloat64);
    const Tensor loss = (w * x).sum();
    write(x);
    CHECK_THROWS_WITH(loss.backward(), Contains("MulBackward") && Contains("[4]"));
  }
}

TEST_CASE("a parameter changed under NoGradGuard between forward and backward is refused",
          "[core][autograd][version]") {
  // The optimizer.step()-between-forward-and-backward mistake, with the write spelled out.
  Tensor w = tg::tensor({1, 2, 3}, {}, tg::kFloat64).requires_grad_();
  const Tensor loss = w.exp().sum();  // ExpBackward saves its output, which does not share w
  const Tensor loss2 = (w * w).sum();  // MulBackward saves w itself
  {
    tg::NoGradGuard no_grad;
    w.copy_(tg::zeros({3}, tg::kFloat64));
  }
  loss.backward();  // the saved exp(w) was not touched: the gradient is right
  CHECK(w.grad().to_vector<double>() ==
        std::vector<double>{std::exp(1.0), std::exp(2.0), std::exp(3.0)});
  CHECK_THROWS_WITH(loss2.backward(), Contains("MulBackward") && Contains("[3]"));
}

TEST_CASE("an output saved by its own node (exp, sqrt, relu) is checked too", "[core][autograd][version]") {
  Tensor x = tg::tensor({1, 4}, {}, tg::kFloat64).requires_grad_();
  for (const auto& [name, op] : std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>>{
           {"ExpBackward", [](const Tensor& t) { return t.exp(); }},
           {"SqrtBackward", [](const Tensor& t) { return t.sqrt(); }},
           {"ReluBackward", [](const Tensor& t) { return t.relu(); }}}) {
    INFO(name);
    Tensor y = op(x);
    {
      tg::NoGradGuard no_grad;
      y.fill_(7.0);
    }
    CHECK_THROWS_WITH(y.sum().backward(), Contains(name));
  }
}

TEST_CASE("an unmodified graph backwards as before: versions cost nothing when nothing changed",
          "[core][autograd][version]") {
  Tensor w = tg::tensor({1, 2}, {}, tg::kFloat64).requires_grad_();
  Tensor x = tg::tensor({3, 4}, {}, tg::kFloat64);
  x.fill_(3.0);  // before the forward pass: the node saves version 1
  (w * x).sum().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3, 3});
}

// --- 2. a backward that throws -------------------------------------------------------------------

TEST_CASE("a failed backward leaves no pending gradient behind and every grad as before",
          "[core][autograd][failure]") {
  // A shared interior node h receives gradient, then another branch fails.
  Tensor x = tg::tensor({2}, {}, tg::kFloat64).requires_grad_();
  Tensor c = tg::tensor({1}, {}, tg::kFloat64);
  const Tensor h = x * x;             // dh/dx = 2x = 4
  const Tensor broken = (h * c) + h;  // MulBackward saves c, which is then changed
  c.fill_(9.0);
  REQUIRE_THROWS_WITH(broken.sum().backward(), Contains("MulBackward"));
  CHECK_FALSE(x.grad().defined());
  h.sum().backward();  // a new root through the same h: only its own gradient arrives
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4});
}

TEST_CASE("a leaf that already received gradient in a failed pass gets its old grad back",
          "[core][autograd][failure]") {
  Tensor v = tg::tensor({1, 1}, {}, tg::kFloat64).requires_grad_();
  Tensor x = tg::tensor({1, 1}, {}, tg::kFloat64).requires_grad_();
  v.set_grad(tg::full({2}, 10.0, tg::kFloat64));
  bool v_accumulated = false;
  v.register_post_accumulate_grad_hook([&](const Tensor&) { v_accumulated = true; });
  x.register_hook([](const Tensor&) -> Tensor { throw tg::Error("hook: refused"); });
  const Tensor loss = (x * 3.0).sum() + (v * 2.0).sum();  // the engine walks v's branch first
  REQUIRE_THROWS_WITH(loss.backward(), Contains("hook: refused"));
  REQUIRE(v_accumulated);  // the pass did change v.grad before it failed...
  CHECK(v.grad().to_vector<double>() == std::vector<double>{10, 10});  // ...and put it back
  CHECK_FALSE(x.grad().defined());
  // The graph is released, and says why.
  CHECK_THROWS_WITH(loss.backward(), Contains("previous backward through this part of the graph failed"));
}

// --- 3. releasing long graphs --------------------------------------------------------------------

TEST_CASE("graphs of a million ops, with two edges to the same input, build, backward and drop "
          "in a 256 KiB stack",
          "[core][autograd][release]") {
  constexpr int kOps = 1'000'000;
  const int64_t baseline = tg::autograd::live_nodes();
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> steps{
      {"y * y", [](const Tensor& y) { return y * y; }},
      {"y + y", [](const Tensor& y) { return (y + y) * 0.5; }},
      {"matmul(y, y)", [](const Tensor& y) { return tg::matmul(y, y); }},
  };
  for (const auto& [what, step] : steps) {
    INFO(what);
    const bool dropped = run_with_stack(256 << 10, [&] {
      Tensor x = tg::ones({1, 1}, tg::kFloat64).requires_grad_();
      Tensor y = x;
      for (int i = 0; i < kOps / 4; ++i) y = step(y);  // dropped without backward
    });
    CHECK(dropped);
    CHECK(tg::autograd::live_nodes() == baseline);
  }
  double grad = 0.0;
  const bool backwarded = run_with_stack(256 << 10, [&] {
    Tensor x = tg::ones({1, 1}, tg::kFloat64).requires_grad_();
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = y * y;
    y.sum().backward();  // d(x^(2^n))/dx at x = 1 is 2^n = inf in float64; here only the walk matters
    grad = x.grad().item();
  });
  CHECK(backwarded);
  CHECK(std::isinf(grad));
  CHECK(tg::autograd::live_nodes() == baseline);
}

// --- 4. set_grad ---------------------------------------------------------------------------------

TEST_CASE("set_grad refuses the tensor itself and a gradient that has a gradient", "[core][autograd][set_grad]") {
  Tensor t = tg::ones({2});
  CHECK_THROWS_WITH(t.set_grad(t), Contains("set_grad") && Contains("its own gradient"));
  CHECK_FALSE(t.grad().defined());
  Tensor g = tg::zeros({2});
  t.set_grad(g);
  CHECK_THROWS_WITH(g.set_grad(t), Contains("set_grad") && Contains("has a gradient of its own"));
  CHECK_FALSE(g.grad().defined());
  // A copy of the values is fine.
  Tensor u = tg::ones({2});
  u.set_grad(u.detach().clone());
  CHECK(u.grad().to_vector<float>() == std::vector<float>{1, 1});
}

// --- 5. grad() from another thread -----------------------------------------------------------------

TEST_CASE("a monitoring thread may read grad() while backward runs and sees whole gradients",
          "[core][autograd][threads]") {
  // Every backward adds exactly 1 to each element, so any gradient a reader sees is k·ones for
  // some k: a torn or half-written one would show mixed values.
  Tensor w = tg::zeros({4096}, tg::kFloat64).requires_grad_();
  std::atomic<bool> done{false};
  std::atomic<int64_t> reads{0}, inconsistent{0};
  std::thread monitor([&] {
    while (!done.load()) {
      const Tensor g = w.grad();
      if (!g.defined()) continue;
      const std::vector<double> values = g.to_vector<double>();
      for (double value : values) inconsistent += value != values.front();
      ++reads;
    }
  });
  for (int step = 1; step <= 300 || (reads < 100 && step < 1'000'000); ++step) {
    (w + 1.0).sum().backward();
    if (step % 100 == 0) w.set_grad(Tensor());
  }
  w.set_grad(Tensor());
  done = true;
  monitor.join();
  CHECK(inconsistent == 0);
  CHECK(reads > 0);
  CHECK_FALSE(w.grad().defined());  // reset after the last step
}
