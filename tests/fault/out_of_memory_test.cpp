// Running out of memory at any single allocation of a training step, a save or a load: the
// failure is a tg::Error (never std::bad_alloc, never std::terminate), a valid checkpoint is
// never reported as damaged, and the next step, save and load succeed. And at any single
// allocation of each public op called alone: a tg::Error that names the op the user called.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <new>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "failing_allocator.hpp"
#include "support/fixtures.hpp"

namespace {

// The allocation being failed, for the terminate handler's report.
int64_t current_allocation = 0;

// tmpfs when there is one: each save fsyncs, which on a disk would make a sweep of a thousand
// saves take minutes.
std::string checkpoint_path() {
  const std::string name = "/tg_fault_" + std::to_string(::getpid()) + ".safetensors";
  return (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::string(TG_FAULT_SCRATCH_DIR)) + name;
}

// One training step of a model with a weight large enough (256 KiB) for the buffer cache, then a
// save and a load of the model with its optimizer, scheduler and a generator. Each nn layer and a loss with options, so that the forward pass
// runs every kind of node: GEMM, elementwise, both row normalisations, smoothed cross-entropy.
struct Training {
  tg::nn::Sequential model{tg::nn::Linear(256, 256), tg::nn::ReLU(), tg::nn::LayerNorm({256}),
                           tg::nn::Linear(256, 8), tg::nn::RMSNorm({8}), tg::nn::Linear(8, 3)};
  tg::optim::SGD optimizer{model.parameters(), {.lr = 0.01, .momentum = 0.9}};
  tg::optim::ReduceLROnPlateau scheduler{optimizer};
  tg::Generator generator;
  // Made here: a vector built at the call would be the test's allocation, not the library's.
  tg::CheckpointOptions with_generator{.generators = {&generator}};
  tg::Tensor x = tg::randn({8, 256});
  std::vector<int64_t> labels{0, 1, 2, 0, 1, 2, 0, 1};
  std::string path = checkpoint_path();

  ~Training() { std::remove(path.c_str()); }

  const char* phase = "";  // what step_save_load was doing, for the report

  double step() {
    phase = "forward";
    optimizer.zero_grad();
    tg::Tensor loss = tg::nn::cross_entropy(model(x), labels, {.label_smoothing = 0.1});
    phase = "backward";
    loss.backward();
    phase = "optimizer step";
    optimizer.step();
    return loss.item();
  }

  void step_save_load() {
    step();
    phase = "scheduler step";
    scheduler.step(0.5);
    // The whole state a resumed run needs: its optimizer (JSON parameter groups), its scheduler
    // (JSON base learning rates and counters) and a generator.
    phase = "save";
    tg::save(model, optimizer, scheduler, path, with_generator);
    phase = "load";
    tg::load(model, optimizer, scheduler, path, with_generator);
  }

  // The parameters and momentum buffers, byte for byte.
  std::string state() {
    std::string bytes;
    const auto append = [&bytes](const tg::Tensor& t) {
      bytes.append(reinterpret_cast<const char*>(t.data<float>()), static_cast<size_t>(t.numel()) * sizeof(float));
    };
    for (const tg::Tensor& p : model.parameters()) append(p);
    for (const tg::Tensor& b : optimizer.momentum_buffers())
      if (b.defined()) append(b);
    return bytes;
  }
};

}  // namespace

TEST_CASE("failing any one allocation of a step, save and load is a tg::Error, and the next step works",
          "[fault][memory]") {
  std::set_terminate([] {
    std::fprintf(stderr, "std::terminate while allocation %lld was failing\n", static_cast<long long>(current_allocation));
    std::abort();
  });
  tg::manual_seed(0);
  Training training;
  training.step_save_load();  // first-use allocations (statics, caches) happen outside the sweep

  tg::fault::fail_allocation(0);
  training.step_save_load();
  tg::fault::stop();
  const int64_t total = tg::fault::allocations();
  INFO(total << " allocations in one step + save + load");
  REQUIRE(total > 100);  // the counter sees the library's allocations, tensors included

  // Every allocation (a few hundred, each failure a whole step again); every 4th under a
  // sanitizer, which is several times slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const int64_t stride = 4;
#else
  const int64_t stride = 1;
#endif
  int64_t errors = 0;
  std::vector<std::string> escaped;
  int64_t not_reached = 0;
  for (int64_t k = 1; k <= total; k += stride) {
    current_allocation = k;
    tg::fault::fail_allocation(k);
    try {
      training.step_save_load();
    } catch (const tg::Error& error) {
      ++errors;
      const std::string message = error.what();
      // The checkpoint on disk is valid: a load that ran out of memory must not call it damaged.
      if (message.find("truncated") != std::string::npos || message.find("corrupted") != std::string::npos ||
          message.find("malformed") != std::string::npos)
        escaped.push_back("allocation " + std::to_string(k) + " blamed the file: " + message);
      // And the message says what happened, after the name of the op.
      else if (message.find(": out of memory") == std::string::npos &&
               message.find(": cannot allocate ") == std::string::npos)
        escaped.push_back("allocation " + std::to_string(k) + " (" + training.phase + ") gave an unclear error: " +
                          message);
    } catch (const std::bad_alloc&) {
      escaped.push_back("allocation " + std::to_string(k) + " (" + training.phase + ") escaped as std::bad_alloc");
    } catch (const std::exception& error) {
      escaped.push_back("allocation " + std::to_string(k) + " (" + training.phase + ") escaped as " +
                        typeid(error).name() + ": " + error.what());
    }
    // The count can differ by an allocation or two between runs (a container's growth): the
    // last k may not be reached, nothing else may be missed.
    if (!tg::fault::failed()) ++not_reached;
    tg::fault::stop();
    INFO("after failing allocation " << k);

    // Still usable: a whole step, save and load succeed, and load brings back what was saved.
    const double loss = training.step();
    REQUIRE(std::isfinite(loss));
    const std::string saved = training.state();
    tg::save(training.model, training.optimizer, training.scheduler, training.path, training.with_generator);
    tg::load(training.model, training.optimizer, training.scheduler, training.path, training.with_generator);
    REQUIRE(training.state() == saved);
  }
  std::string report;
  for (const std::string& line : escaped) report += line + "\n";
  INFO(escaped.size() << " failures were not a proper tg::Error:\n" << report);
  CHECK(escaped.empty());
  CHECK(not_reached <= 2);
  REQUIRE(errors > 0);
}

TEST_CASE("an allocation larger than memory is a tg::Error naming the op and the bytes", "[fault][memory]") {
  // 2^42 floats: 16 TiB, more than any test machine has.
  REQUIRE_THROWS_WITH(tg::zeros({int64_t{1} << 42}), Catch::Contains("zeros") || Catch::Contains("full"));
  REQUIRE_THROWS_WITH(tg::empty({int64_t{1} << 42}), Catch::Contains("empty: cannot allocate 17592186044416 bytes"));
  // And the next allocation works.
  REQUIRE(tg::ones({4}).sum().item() == 4.0);
}

namespace {

// A public op called on inputs that require grad, so that it also saves tensors and records its
// node, under the name the user calls it by.
struct OpCall {
  std::vector<std::string> ops;  // the names its errors may start with: the op's (a module call: its ops' and "forward")
  std::function<tg::Tensor()> call;
};

std::vector<double> values(const tg::Tensor& t) {
  const tg::Tensor doubles = t.detach().to(tg::kFloat64);
  return std::vector<double>(doubles.data<double>(), doubles.data<double>() + doubles.numel());
}

// Fails each allocation of `call` in turn. What went wrong goes to `wrong`: a failure that was not
// a tg::Error saying "<op>: out of memory" or "<op>: cannot allocate <n> bytes ..." for one of
// `ops` (whichever inner op or tensor failed), or a call that returned although an allocation
// failed. After each, the call must work and give the same `project`ed result again.
template <typename Call, typename Project>
void fail_each_allocation(const std::vector<std::string>& ops, const Call& call, const Project& project,
                          std::vector<std::string>& wrong) {
  const auto expected = project(call());
  tg::fault::fail_allocation(0);
  (void)call();
  tg::fault::stop();
  const int64_t total = tg::fault::allocations();
  const std::string where = ops.front() + ", allocation ";
  for (int64_t k = 1; k <= total; ++k) {
    tg::fault::fail_allocation(k);
    try {
      (void)call();
      if (tg::fault::failed()) wrong.push_back(where + std::to_string(k) + " failed, yet the call returned");
    } catch (const tg::Error& error) {
      const std::string message = error.what();
      const bool names_op = std::any_of(ops.begin(), ops.end(), [&message](const std::string& op) {
        return message.rfind(op + ": out of memory", 0) == 0 || message.rfind(op + ": cannot allocate ", 0) == 0;
      });
      if (!names_op) wrong.push_back(where + std::to_string(k) + ": " + message);
    } catch (const std::bad_alloc&) {
      wrong.push_back(where + std::to_string(k) + " escaped as std::bad_alloc");
    }
    tg::fault::stop();
    INFO(where << k);
    REQUIRE(project(call()) == expected);  // nothing half-done left behind
  }
}

}  // namespace

TEST_CASE("failing any one allocation of a public op is a tg::Error naming that op, and the op then works",
          "[fault][memory]") {
  namespace F = tg::nn::functional;
  tg::manual_seed(0);
  const auto leaf = [](const tg::Tensor& values) { return values.detach().requires_grad_(); };
  const tg::Tensor a = leaf(tg::randn({4, 3}, tg::kFloat64)), b = leaf(tg::randn({4, 3}, tg::kFloat64));
  const tg::Tensor row = leaf(tg::randn({3}, tg::kFloat64)), square = leaf(tg::randn({3, 3}, tg::kFloat64));
  const tg::Tensor positive = leaf(tg::rand({4, 3}, tg::kFloat64) + 0.5);
  const tg::Tensor probabilities = leaf(tg::rand({4, 3}, tg::kFloat64) * 0.8 + 0.1);
  const tg::Tensor soft_targets = leaf((tg::randn({4, 3}, tg::kFloat64)).exp() / 3.0);
  const tg::Tensor binary_targets = tg::tensor({1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0}, {4, 3}, tg::kFloat64);
  const tg::Tensor classes = tg::tensor({0, 2, 1, 2}, {4}, tg::kInt64);
  const tg::Tensor class_weight = tg::tensor({0.5, 1.0, 2.0}, {3}, tg::kFloat64);
  const tg::Tensor pos_weight = positive.detach();
  // Arguments are made here: a vector built at the call would be the caller's allocation.
  const std::vector<int64_t> dim0{0}, dim1{1};
  const tg::Shape three_rows{3, -1}, last_dim{3};
  const tg::Shape shape{4, 3};
  const std::vector<double> twelve{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  tg::Generator generator;
  // The same draws on every call.
  const auto seeded = [&generator]() -> tg::Generator& {
    generator.manual_seed(0);
    return generator;
  };
  // A module call copies its hook lists.
  tg::nn::Linear hooked(3, 2);
  hooked.register_forward_pre_hook([](tg::nn::Module&, const tg::Tensor&) { return tg::Tensor(); });
  hooked.register_forward_hook([](tg::nn::Module&, const tg::Tensor&, const tg::Tensor&) { return tg::Tensor(); });
  const tg::Tensor a32 = leaf(a.to(tg::kFloat32));
  const tg::Tensor mask = a > 0.0;
  const std::vector<tg::Tensor> pair{a, b};
  const tg::Tensor rows = tg::tensor({2, 0}, {2}, tg::kInt64);
  const tg::Tensor column_index = tg::tensor({0, 2, 1, 0}, {4, 1}, tg::kInt64);
  const tg::Tensor one_column = leaf(tg::randn({4, 1}, tg::kFloat64));
  const std::vector<OpCall> calls = {
      {{"zeros"}, [&] { return tg::zeros(shape); }},
      {{"ones"}, [&] { return tg::ones(shape, tg::kInt64); }},
      {{"full"}, [&] { return tg::full(shape, 2.5); }},
      {{"scalar_tensor"}, [&] { return tg::scalar_tensor(2.5); }},
      {{"zeros_like"}, [&] { return tg::zeros_like(a); }},
      {{"full_like"}, [&] { return tg::full_like(a, -1.0); }},
      {{"tensor"}, [&] { return tg::tensor(twelve, shape, tg::kFloat64); }},
      {{"rand"}, [&] { return tg::rand(shape, seeded()); }},
      {{"randn"}, [&] { return tg::randn(shape, seeded(), tg::kFloat64); }},
      {{"randint"}, [&] { return tg::randint(0, 10, shape, tg::kInt64, &seeded()); }},
      {{"randperm"}, [&] { return tg::randperm(12, seeded()); }},
      {{"add"}, [&] { return a + b; }},
      {{"add"}, [&] { return a + row; }},  // broadcasting: its own shape and plan vectors
      {{"sub"}, [&] { return a - row; }},
      {{"mul"}, [&] { return a * b; }},
      {{"div"}, [&] { return a / positive; }},
      {{"neg"}, [&] { return -a; }},
      {{"sqrt"}, [&] { return positive.sqrt(); }},
      {{"pow"}, [&] { return a.pow(3.0); }},
      {{"exp"}, [&] { return a.exp(); }},
      {{"log"}, [&] { return positive.log(); }},
      {{"relu"}, [&] { return a.relu(); }},
      {{"sum"}, [&] { return a.sum(dim1); }},
      {{"mean"}, [&] { return a.mean(); }},
      {{"var"}, [&] { return a.var(dim0); }},
      {{"matmul"}, [&] { return a.matmul(square); }},
      {{"reshape"}, [&] { return a.reshape(three_rows); }},
      {{"transpose"}, [&] { return a.transpose(0, 1); }},
      {{"clone"}, [&] { return a.clone(); }},
      {{"to"}, [&] { return a.to(tg::kFloat32); }},
      {{"log1p"}, [&] { return positive.log1p(); }},
      {{"tanh"}, [&] { return a.tanh(); }},
      {{"sigmoid"}, [&] { return a.sigmoid(); }},
      {{"gelu"}, [&] { return a.gelu(); }},
      {{"gelu"}, [&] { return a32.gelu("tanh"); }},  // float32: the vector kernels' own path
      {{"abs"}, [&] { return a.abs(); }},
      {{"clamp"}, [&] { return a.clamp(-0.5, 0.5); }},
      {{"maximum"}, [&] { return a.maximum(row); }},
      {{"minimum"}, [&] { return a.minimum(b); }},
      {{"where"}, [&] { return tg::where(mask, a, b); }},
      {{"masked_fill"}, [&] { return a.masked_fill(mask, 0.25); }},
      {{"lt"}, [&] { return a < b; }},
      {{"ge"}, [&] { return a >= 0.5; }},
      {{"softmax"}, [&] { return a.softmax(1); }},
      {{"log_softmax"}, [&] { return a.log_softmax(0); }},
      {{"logsumexp"}, [&] { return a.logsumexp(dim1); }},
      {{"max"}, [&] { return a.max(1).values; }},
      {{"min"}, [&] { return a.min(); }},
      {{"argmax"}, [&] { return a.argmax(0); }},
      {{"cat"}, [&] { return tg::cat(pair, 1); }},
      {{"stack"}, [&] { return tg::stack(pair); }},
      {{"split"}, [&] { return a.split(2, 0).back(); }},
      {{"chunk"}, [&] { return a.chunk(3, 1).front(); }},
      {{"index_select"}, [&] { return a.index_select(0, rows); }},
      {{"gather"}, [&] { return a.gather(1, column_index); }},
      {{"scatter_add"}, [&] { return a.scatter_add(1, column_index, one_column); }},
      {{"embedding"}, [&] { return F::embedding(classes, square); }},
      {{"dropout"}, [&] { return F::dropout(a, 0.5, true, &seeded()); }},
      {{"linear"}, [&] { return F::linear(a, square, row); }},
      {{"layer_norm"}, [&] { return F::layer_norm(a, last_dim, row, row); }},
      {{"rms_norm"}, [&] { return F::rms_norm(a, last_dim, row); }},
      {{"relu"}, [&] { return F::relu(a); }},
      {{"linear", "forward"}, [&] { return hooked(a32); }},
      {{"cross_entropy"},
       [&] { return tg::nn::cross_entropy(a, {0, 2, 1, 2}, {.weight = class_weight, .label_smoothing = 0.1}); }},
      {{"cross_entropy"}, [&] { return tg::nn::cross_entropy(a, soft_targets); }},
      {{"nll_loss"}, [&] { return tg::nn::nll_loss(a, classes); }},
      {{"mse_loss"}, [&] { return tg::nn::mse_loss(a, b); }},
      {{"l1_loss"}, [&] { return tg::nn::l1_loss(a, b, tg::nn::Reduction::Sum); }},
      {{"smooth_l1_loss"}, [&] { return tg::nn::smooth_l1_loss(a, b, tg::nn::Reduction::None); }},
      {{"huber_loss"}, [&] { return tg::nn::huber_loss(a, b); }},
      {{"binary_cross_entropy"}, [&] { return tg::nn::binary_cross_entropy(probabilities, binary_targets); }},
      {{"binary_cross_entropy_with_logits"},
       [&] { return tg::nn::binary_cross_entropy_with_logits(a, binary_targets, {}, pos_weight); }},
  };
  std::vector<std::string> wrong;
  for (const OpCall& call : calls) fail_each_allocation(call.ops, call.call, values, wrong);
  std::string report;
  for (const std::string& line : wrong) report += line + "\n";
  INFO(wrong.size() << " failed allocations were not a tg::Error naming the op:\n" << report);
  CHECK(wrong.empty());
}

TEST_CASE("failing any one allocation of gradcheck or of printing a tensor is a tg::Error naming it",
          "[fault][memory]") {
  const tg::Tensor x = tg::randn({3, 2}, tg::kFloat64).requires_grad_();
  const std::vector<tg::Tensor> inputs{x};
  const tg::DifferentiableFunction square_sum = [](const std::vector<tg::Tensor>& xs) { return (xs[0] * xs[0]).sum(); };
  // The stream's buffer is made here, large enough: a stream that cannot grow swallows the error.
  std::ostringstream out(std::string(4096, ' '));
  std::vector<std::string> wrong;
  fail_each_allocation(
      {"gradcheck"}, [&] { return tg::gradcheck(square_sum, inputs); },
      [](const tg::GradcheckResult& result) { return result.passed; }, wrong);
  fail_each_allocation(
      {"print"},
      [&] {
        out.seekp(0);
        out << x;
        return static_cast<int64_t>(out.tellp());
      },
      [](int64_t length) { return length; }, wrong);
  std::string report;
  for (const std::string& line : wrong) report += line + "\n";
  INFO(wrong.size() << " failed allocations were not a tg::Error naming the op:\n" << report);
  CHECK(wrong.empty());
}
