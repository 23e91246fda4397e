// Edge cases of the modules and losses: empty batches and zero-sized features through every module,
// loss and the SGD step; NaN and Inf through every module and loss, compared with PyTorch 1.13's
// output; and one model used for inference from several threads at once.
//
// (A constant LayerNorm row and an empty LayerNorm batch are in layer_norm_test.cpp.) Every
// expected value is what PyTorch returns for the same input in float64, e.g.
//   y = F.cross_entropy(torch.tensor([[-inf, 0., 1.], [0., 1., 2.]], requires_grad=True), torch.tensor([0, 2]))
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

using tg::testing::kInf;
using tg::testing::kNaN;
using tg::testing::require_ieee_equal;
using tg::testing::values;

// The raw bytes of a tensor, without Catch2 assertions (which must not run off the main thread).
std::vector<unsigned char> raw_bytes(const Tensor& t) {
  const auto* begin = t.dtype() == tg::kFloat32 ? reinterpret_cast<const unsigned char*>(t.data<float>())
                                                : reinterpret_cast<const unsigned char*>(t.data<double>());
  return std::vector<unsigned char>(begin, begin + t.numel() * static_cast<int64_t>(tg::element_size(t.dtype())));
}

bool all_zero(const Tensor& t) {
  for (double v : values(t))
    if (v != 0.0) return false;
  return true;
}

// A small model through the modules under test: Linear → ReLU → LayerNorm → Linear.
tg::nn::Sequential make_mlp(int64_t in, int64_t hidden, int64_t out) {
  return tg::nn::Sequential(tg::nn::Linear(in, hidden), tg::nn::ReLU(), tg::nn::LayerNorm({hidden}),
                            tg::nn::Linear(hidden, out));
}

}  // namespace

// --- empty batches and zero-sized features ------------------------------------------------------

TEST_CASE("empty: Linear with an empty batch gives dW = 0 and db = 0", "[nn][edge][empty]") {
  // torch: lin = nn.Linear(4, 3); lin(torch.zeros(0, 4)).sum().backward() -> zeros, zeros
  const Shape batch_shape = GENERATE(Shape{0, 4}, Shape{2, 0, 4}, Shape{0, 0, 4});
  INFO("x " << tg::to_string(batch_shape));
  tg::manual_seed(5);
  tg::nn::Linear lin(4, 3);
  Tensor x = tg::randn(batch_shape).requires_grad_();
  const Tensor y = lin(x);
  Shape out_shape = batch_shape;
  out_shape.back() = 3;
  REQUIRE(y.shape() == out_shape);
  y.sum().backward();
  REQUIRE(lin.weight.grad().shape() == Shape{3, 4});
  REQUIRE(lin.bias.grad().shape() == Shape{3});
  CHECK(all_zero(lin.weight.grad()));
  CHECK(all_zero(lin.bias.grad()));
  CHECK(x.grad().shape() == batch_shape);
}

TEST_CASE("empty: Linear with 0 input or 0 output features, as PyTorch", "[nn][edge][empty]") {
  SECTION("in_features = 0: y = b, and PyTorch's init gives b = 0 (bound 1/sqrt(0) is taken as 0)") {
    // torch: lin = nn.Linear(0, 3); lin(torch.zeros(2, 0)) = zeros(2, 3); bias.grad = [2, 2, 2]
    tg::nn::Linear lin(0, 3);
    REQUIRE(lin.weight.shape() == Shape{3, 0});
    CHECK(all_zero(lin.bias));
    Tensor x = tg::zeros({2, 0}).requires_grad_();
    const Tensor y = lin(x);
    REQUIRE(y.shape() == Shape{2, 3});
    CHECK(all_zero(y));
    y.sum().backward();
    CHECK(lin.weight.grad().shape() == Shape{3, 0});
    CHECK(values(lin.bias.grad()) == std::vector<double>{2, 2, 2});
    CHECK(x.grad().shape() == Shape{2, 0});
    // Without a bias the sum of no products is 0.
    tg::nn::Linear no_bias(0, 3, {.bias = false});
    CHECK(all_zero(no_bias(tg::zeros({2, 0}))));
  }
  SECTION("out_features = 0: an empty output, and no gradient reaches x") {
    tg::nn::Linear lin(4, 0);
    Tensor x = tg::randn({2, 4}).requires_grad_();
    const Tensor y = lin(x);
    REQUIRE(y.shape() == Shape{2, 0});
    y.sum().backward();
    CHECK(x.grad().shape() == Shape{2, 4});
    CHECK(all_zero(x.grad()));
    CHECK(lin.weight.grad().shape() == Shape{0, 4});
    CHECK(lin.bias.grad().shape() == Shape{0});
  }
}

TEST_CASE("empty: ReLU and LayerNorm with empty batches or an empty normalized_shape", "[nn][edge][empty]") {
  SECTION("ReLU") {
    tg::nn::ReLU relu;
    Tensor x = tg::zeros({0, 5}).requires_grad_();
    const Tensor y = relu(x);
    REQUIRE(y.shape() == Shape{0, 5});
    y.sum().backward();
    CHECK(x.grad().shape() == Shape{0, 5});
  }
  SECTION("LayerNorm over {4} of a [3, 0, 4] input: no rows, zero dgamma and dbeta") {
    tg::nn::LayerNorm ln({4});
    Tensor x = tg::zeros({3, 0, 4}, tg::kFloat32).requires_grad_();
    const Tensor y = ln(x);
    REQUIRE(y.shape() == Shape{3, 0, 4});
    y.sum().backward();
    CHECK(x.grad().shape() == Shape{3, 0, 4});
    CHECK(all_zero(ln.weight.grad()));
    CHECK(all_zero(ln.bias.grad()));
  }
  SECTION("LayerNorm over an empty normalized_shape {0}: empty rows, as in PyTorch") {
    // torch: ln = nn.LayerNorm((0,)); ln(torch.zeros(2, 0)) = tensor([], size=(2, 0)); grads empty
    tg::nn::LayerNorm ln({0});
    Tensor x = tg::zeros({2, 0}).requires_grad_();
    const Tensor y = ln(x);
    REQUIRE(y.shape() == Shape{2, 0});
    y.sum().backward();
    CHECK(x.grad().shape() == Shape{2, 0});
    CHECK(ln.weight.grad().shape() == Shape{0});
    CHECK(ln.bias.grad().shape() == Shape{0});
  }
}

TEST_CASE("empty: a Sequential MLP on an empty batch, through cross_entropy and SGD", "[nn][edge][empty]") {
  // torch: the same model on torch.zeros(0, 2): cross_entropy = nan and every parameter's grad is
  // zeros (nothing flows back from no rows), so an SGD step with momentum leaves the parameters
  // unchanged.
  tg::manual_seed(11);
  tg::nn::Sequential model = make_mlp(2, 4, 3);
  const Tensor x = tg::zeros({0, 2});
  const Tensor logits = model(x);
  REQUIRE(logits.shape() == Shape{0, 3});
  const Tensor loss = tg::nn::cross_entropy(logits, {});
  CHECK(std::isnan(loss.item()));
  loss.backward();
  std::vector<std::vector<double>> before;
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().shape() == p.shape());
    CHECK(all_zero(p.grad()));
    before.push_back(values(p));
  }
  tg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  opt.step();
  const auto after = model.parameters();
  for (size_t i = 0; i < after.size(); ++i) CHECK(values(after[i]) == before[i]);
}

TEST_CASE("empty: mse_loss and cross_entropy of nothing are nan, as in PyTorch", "[nn][edge][empty]") {
  // torch: F.mse_loss(zeros(0, 3), zeros(0, 3)) = nan, grad size (0, 3);
  //        F.cross_entropy(zeros(0, 3), zeros(0, dtype=long)) = nan, grad size (0, 3)
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  Tensor input = tg::zeros({0, 3}, dtype).requires_grad_();
  Tensor target = tg::zeros({0, 3}, dtype).requires_grad_();
  const Tensor mse = F::mse_loss(input, target);
  CHECK(mse.shape() == Shape{});
  CHECK(std::isnan(mse.item()));
  mse.backward();
  CHECK(input.grad().shape() == Shape{0, 3});
  CHECK(target.grad().shape() == Shape{0, 3});

  Tensor logits = tg::zeros({0, 3}, dtype).requires_grad_();
  const Tensor ce = F::cross_entropy(logits, {});
  CHECK(std::isnan(ce.item()));
  ce.backward();
  CHECK(logits.grad().shape() == Shape{0, 3});
  // Zero classes with zero rows is just as empty; zero classes with rows has no valid target.
  CHECK(std::isnan(F::cross_entropy(tg::zeros({0, 0}, dtype), {}).item()));
  REQUIRE_THROWS_WITH(F::cross_entropy(tg::zeros({2, 0}, dtype), {0, 0}),
                      Catch::Contains("cross_entropy") && Catch::Contains("out of range"));
}

TEST_CASE("empty: an SGD step on a zero-element parameter", "[nn][edge][empty][optim]") {
  // torch: p = zeros(0, 4, requires_grad=True); p.grad = zeros(0, 4);
  //        SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1).step() -> p and the buffer stay (0, 4)
  Tensor empty_param = tg::zeros({0, 4}).requires_grad_();
  Tensor other = tg::ones({2}).requires_grad_();
  tg::optim::SGD opt({empty_param, other}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1});
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    (empty_param.sum() + other.sum()).backward();
    REQUIRE(empty_param.grad().shape() == Shape{0, 4});
    opt.step();
  }
  CHECK(empty_param.shape() == Shape{0, 4});
  REQUIRE(opt.momentum_buffers()[0].defined());
  CHECK(opt.momentum_buffers()[0].shape() == Shape{0, 4});
  CHECK(opt.step_count() == 2);
  // The other parameter was updated as usual: g = 1 + 0.1·p; buf = g, then 0.9·buf + g.
  const float p1 = 1.0f - 0.1f * (1.0f + 0.1f * 1.0f);
  const float g2 = 1.0f + 0.1f * p1;
  const float p2 = p1 - 0.1f * (0.9f * 1.1f + g2);
  CHECK(other.to_vector<float>()[0] == Approx(p2).epsilon(1e-6));
}

TEST_CASE("empty: a checkpoint of a model with zero-element parameters round-trips", "[nn][edge][empty]") {
  tg::manual_seed(12);
  tg::nn::Sequential model(tg::nn::Linear(0, 3), tg::nn::Linear(3, 0), tg::nn::LayerNorm({0}));
  const std::string path = "edge_cases_zero_element.safetensors";
  tg::save(model, path);
  tg::manual_seed(13);
  tg::nn::Sequential loaded(tg::nn::Linear(0, 3), tg::nn::Linear(3, 0), tg::nn::LayerNorm({0}));
  tg::NoGradGuard no_grad;
  loaded.at<tg::nn::Linear>(0).bias.fill_(7.0);
  tg::load(loaded, path);
  std::remove(path.c_str());
  const auto expected = model.named_parameters(), actual = loaded.named_parameters();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(actual[i].first);
    CHECK(actual[i].first == expected[i].first);
    CHECK(actual[i].second.shape() == expected[i].second.shape());
    CHECK(values(actual[i].second) == values(expected[i].second));
  }
}

// --- NaN and Inf ----------------------------------------------------------------------------------

TEST_CASE("NaN and Inf through ReLU, as PyTorch", "[nn][edge][ieee]") {
  // torch.relu([nan, inf, -inf, -1, 2]) = [nan, inf, 0, 0, 2]; the gradient passes at nan and inf
  tg::nn::ReLU relu;
  Tensor x = tg::tensor({kNaN, kInf, -kInf, -1.0, 2.0}, {}, tg::kFloat64).requires_grad_();
  const Tensor y = relu(x);
  require_ieee_equal(y, {kNaN, kInf, 0.0, 0.0, 2.0}, 0.0);
  y.backward(tg::full({5}, 3.0, tg::kFloat64));
  require_ieee_equal(x.grad(), {3.0, 3.0, 0.0, 0.0, 3.0}, 0.0);
}

TEST_CASE("NaN and Inf through LayerNorm: the row turns NaN, the other rows are untouched", "[nn][edge][ieee]") {
  // torch: F.layer_norm(x, (3,), w=[1, 2, .5], b=[0, .1, .2]) for rows [1, inf, 2], [1, 2, 4],
  // [nan, 1, 2], [-inf, 0, 1], with dy = [[1, 2, 3], [.5, -1, 2], [1, 1, 1], [1, 0, -1]]
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const double tol = dtype == tg::kFloat32 ? 1e-5 : 1e-12;
  tg::nn::LayerNorm ln({3});
  ln.to(dtype);
  ln.weight = tg::tensor({1.0, 2.0, 0.5}, {}, dtype);
  ln.bias = tg::tensor({0.0, 0.1, 0.2}, {}, dtype);
  Tensor x = tg::tensor({1.0, kInf, 2.0, 1.0, 2.0, 4.0, kNaN, 1.0, 2.0, -kInf, 0.0, 1.0}, {4, 3}, dtype).requires_grad_();
  const Tensor y = ln(x);
  require_ieee_equal(y, {kNaN, kNaN, kNaN, -1.069041531450298, -0.4345207657251492, 0.8681509571564359, kNaN, kNaN,
                         kNaN, kNaN, kNaN, kNaN},
                     tol);
  y.backward(tg::tensor({1, 2, 3, 0.5, -1, 2, 1, 1, 1, 1, 0, -1}, {4, 3}, dtype));
  require_ieee_equal(x.grad(), {kNaN, kNaN, kNaN, 0.9163188582553746, -1.374482582611603, 0.4581637243562282, kNaN,
                                kNaN, kNaN, kNaN, kNaN, kNaN},
                     tol);
  require_ieee_equal(ln.weight.grad(), {kNaN, kNaN, kNaN}, tol);
  require_ieee_equal(ln.bias.grad(), {3.5, 2.0, 5.0}, tol);
}

TEST_CASE("NaN and Inf through Linear, forward and backward, as PyTorch", "[nn][edge][ieee]") {
  SECTION("an Inf input meets a 0 weight: inf·0 = nan") {
    // torch: F.linear([[inf, 1], [1, 2]], W=[[0, 1], [1, 0], [2, 3]], b=[.5, -.5, 1]) with dy = 1
    tg::nn::Linear lin(2, 3);
    lin.to(tg::kFloat64);
    lin.weight = tg::tensor({0.0, 1.0, 1.0, 0.0, 2.0, 3.0}, {3, 2}, tg::kFloat64);
    lin.bias = tg::tensor({0.5, -0.5, 1.0}, {}, tg::kFloat64);
    Tensor x = tg::tensor({kInf, 1.0, 1.0, 2.0}, {2, 2}, tg::kFloat64).requires_grad_();
    const Tensor y = lin(x);
    require_ieee_equal(y, {kNaN, kInf, kInf, 2.5, 0.5, 9.0}, 0.0);
    y.backward(tg::ones({2, 3}, tg::kFloat64));
    require_ieee_equal(x.grad(), {3.0, 4.0, 3.0, 4.0}, 0.0);
    require_ieee_equal(lin.weight.grad(), {kInf, 3.0, kInf, 3.0, kInf, 3.0}, 0.0);
    require_ieee_equal(lin.bias.grad(), {2.0, 2.0, 2.0}, 0.0);
  }
  SECTION("a NaN input poisons its row of y and its column of dW only") {
    // torch: F.linear([[1, nan], [1, 2]], W=[[1, 2], [3, 4], [.5, .5]], b=[.1, .2, .3]) with dy = 1
    Tensor x = tg::tensor({1.0, kNaN, 1.0, 2.0}, {2, 2}, tg::kFloat64).requires_grad_();
    Tensor w = tg::tensor({1.0, 2.0, 3.0, 4.0, 0.5, 0.5}, {3, 2}, tg::kFloat64).requires_grad_();
    Tensor b = tg::tensor({0.1, 0.2, 0.3}, {}, tg::kFloat64).requires_grad_();
    const Tensor y = F::linear(x, w, b);
    require_ieee_equal(y, {kNaN, kNaN, kNaN, 5.1, 11.2, 1.8}, 1e-15);
    y.backward(tg::ones({2, 3}, tg::kFloat64));
    require_ieee_equal(x.grad(), {4.5, 6.5, 4.5, 6.5}, 0.0);
    require_ieee_equal(w.grad(), {2.0, kNaN, 2.0, kNaN, 2.0, kNaN}, 0.0);
    require_ieee_equal(b.grad(), {2.0, 2.0, 2.0}, 0.0);
  }
}

TEST_CASE("NaN and Inf through cross_entropy, as PyTorch", "[nn][edge][ieee]") {
  // Row 1 is always [0, 1, 2] with target 2; row 0 varies, target 0 (1 for the all -inf row).
  struct Case {
    std::string name;
    std::vector<double> row0;
    int64_t target0;
    double loss;
    std::vector<double> grad0;  // torch's gradient of row 0 (row 1 is always the same)
  };
  const Case c = GENERATE(
      Case{"+inf at the target", {kInf, 0.0, 1.0}, 0, kNaN, {kNaN, kNaN, kNaN}},
      Case{"+inf elsewhere", {0.0, kInf, 1.0}, 0, kNaN, {kNaN, kNaN, kNaN}},
      Case{"-inf at the target", {-kInf, 0.0, 1.0}, 0, kInf, {-0.5, 0.13447071068499755, 0.36552928931500245}},
      Case{"-inf elsewhere", {0.0, -kInf, 1.0}, 0, 0.8604338259813016, {-0.36552928931500245, 0.0, 0.36552928931500245}},
      Case{"nan", {kNaN, 0.0, 1.0}, 0, kNaN, {kNaN, kNaN, kNaN}},
      Case{"nan after the max", {0.0, 1.0, kNaN}, 0, kNaN, {kNaN, kNaN, kNaN}},
      Case{"all -inf", {-kInf, -kInf, -kInf}, 1, kNaN, {kNaN, kNaN, kNaN}});
  INFO(c.name);
  std::vector<double> logits_values = c.row0;
  logits_values.insert(logits_values.end(), {0.0, 1.0, 2.0});
  Tensor logits = tg::tensor(logits_values, {2, 3}, tg::kFloat64).requires_grad_();
  const Tensor loss = tg::nn::cross_entropy(logits, {c.target0, 2});
  require_ieee_equal(loss, {c.loss}, 1e-15);
  loss.backward();
  std::vector<double> expected_grad = c.grad0;
  expected_grad.insert(expected_grad.end(), {0.04501528658519022, 0.12236423552739882, -0.1673795221125891});
  require_ieee_equal(logits.grad(), expected_grad, 1e-15);
}

TEST_CASE("NaN and Inf through mse_loss, as PyTorch", "[nn][edge][ieee]") {
  SECTION("inf - inf and a NaN make the loss and their gradients NaN") {
    // torch: F.mse_loss([inf, 1, nan], [inf, 2, 0]) = nan; grads [nan, -2/3, nan] and [nan, 2/3, nan]
    Tensor input = tg::tensor({kInf, 1.0, kNaN}, {}, tg::kFloat64).requires_grad_();
    Tensor target = tg::tensor({kInf, 2.0, 0.0}, {}, tg::kFloat64).requires_grad_();
    const Tensor loss = F::mse_loss(input, target);
    CHECK(std::isnan(loss.item()));
    loss.backward();
    require_ieee_equal(input.grad(), {kNaN, -2.0 / 3.0, kNaN}, 1e-15);
    require_ieee_equal(target.grad(), {kNaN, 2.0 / 3.0, kNaN}, 1e-15);
  }
  SECTION("an Inf makes the loss Inf") {
    // torch: F.mse_loss([inf, 1], [0, 2]) = inf; grads [inf, -1] and [-inf, 1]
    Tensor input = tg::tensor({kInf, 1.0}, {}, tg::kFloat64).requires_grad_();
    Tensor target = tg::tensor({0.0, 2.0}, {}, tg::kFloat64).requires_grad_();
    const Tensor loss = F::mse_loss(input, target);
    CHECK(loss.item() == kInf);
    loss.backward();
    require_ieee_equal(input.grad(), {kInf, -1.0}, 0.0);
    require_ieee_equal(target.grad(), {-kInf, 1.0}, 0.0);
  }
}

TEST_CASE("a NaN gradient makes SGD write NaN into the parameter, without crashing", "[nn][edge][ieee][optim]") {
  // torch.optim.SGD does the same: p -= lr · nan.
  Tensor p = tg::tensor({1.0, 2.0}, {}, tg::kFloat64).requires_grad_();
  tg::optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  (p * tg::tensor({kNaN, 1.0}, {}, tg::kFloat64)).sum().backward();
  opt.step();
  require_ieee_equal(p, {kNaN, 1.9}, 1e-15);
  require_ieee_equal(opt.momentum_buffers()[0], {kNaN, 1.0}, 0.0);
}

// --- one model, several threads ------------------------------------------------------------------

namespace {

// Inputs large enough that Linear's GEMMs and LayerNorm's rows are split into several chunks, so
// each thread's forward itself runs parallel oneTBB work while the other thread's does too.
constexpr int64_t kBatch = 1024, kIn = 16, kHidden = 128, kOut = 5;

}  // namespace

TEST_CASE("one model used for inference from two threads at once gives the single-threaded bits",
          "[nn][edge][threads]") {
  tg::manual_seed(21);
  tg::nn::Sequential model = make_mlp(kIn, kHidden, kOut);
  const std::vector<Tensor> inputs{tg::randn({kBatch, kIn}), tg::randn({kBatch, kIn})};
  std::vector<std::vector<unsigned char>> reference;
  {
    tg::NoGradGuard no_grad;
    for (const Tensor& x : inputs) reference.push_back(raw_bytes(model(x)));
  }
  REQUIRE(reference[0] != reference[1]);  // different inputs, so a mix-up would show

  const int64_t nodes_before = tg::autograd::live_nodes();
  constexpr int kIterations = 40;
  std::vector<int> mismatches(2, 0), recorded(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      tg::NoGradGuard no_grad;  // grad mode is per thread: each thread needs its own guard
      try {
        for (int i = 0; i < kIterations; ++i) {
          const Tensor y = model(inputs[static_cast<size_t>(t)]);
          recorded[t] += y.requires_grad() || y.grad_fn_name() != nullptr;
          mismatches[t] += raw_bytes(y) != reference[static_cast<size_t>(t)];
        }
      } catch (const std::exception&) {
        mismatches[t] += 1000;  // reported by the CHECKs below, on the main thread
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 2; ++t) {
    INFO("thread " << t);
    CHECK(mismatches[t] == 0);
    CHECK(recorded[t] == 0);
  }
  CHECK(tg::autograd::live_nodes() == nodes_before);
  for (const Tensor& p : model.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("grad mode is per thread: one thread trains through the model while another infers",
          "[nn][edge][threads]") {
  // Safe because nothing writes the parameters' values meanwhile: the training thread only
  // writes their .grad (through its own backward and zero_grad), which inference never reads.
  tg::manual_seed(22);
  tg::nn::Sequential model = make_mlp(kIn, kHidden, kOut);
  const Tensor x_infer = tg::randn({kBatch, kIn}), x_train = tg::randn({kBatch, kIn});
  const Tensor target = tg::randn({kBatch, kOut});
  std::vector<unsigned char> infer_reference;
  {
    tg::NoGradGuard no_grad;
    infer_reference = raw_bytes(model(x_infer));
  }
  std::vector<std::vector<unsigned char>> grad_reference;
  model.zero_grad();
  tg::nn::mse_loss(model(x_train), target).backward();
  for (const Tensor& p : model.parameters()) grad_reference.push_back(raw_bytes(p.grad()));

  constexpr int kIterations = 30;
  int infer_mismatches = 0, infer_recorded = 0, grad_mismatches = 0, train_unrecorded = 0;
  std::thread inference([&] {
    tg::NoGradGuard no_grad;
    try {
      for (int i = 0; i < kIterations; ++i) {
        const Tensor y = model(x_infer);
        infer_recorded += y.requires_grad();
        infer_mismatches += raw_bytes(y) != infer_reference;
      }
    } catch (const std::exception&) {
      infer_mismatches += 1000;
    }
  });
  std::thread training([&] {
    try {
      for (int i = 0; i < kIterations; ++i) {
        model.zero_grad();
        const Tensor loss = tg::nn::mse_loss(model(x_train), target);
        train_unrecorded += !loss.requires_grad();
        loss.backward();
        const std::vector<Tensor> params = model.parameters();
        for (size_t k = 0; k < params.size(); ++k)
          grad_mismatches += !params[k].grad().defined() || raw_bytes(params[k].grad()) != grad_reference[k];
      }
    } catch (const std::exception&) {
      grad_mismatches += 1000;
    }
  });
  inference.join();
  training.join();
  CHECK(infer_mismatches == 0);
  CHECK(infer_recorded == 0);
  CHECK(grad_mismatches == 0);
  CHECK(train_unrecorded == 0);
}
