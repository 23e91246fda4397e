// BatchNorm: PyTorch fixtures (F::batch_norm in training and eval mode, BatchNorm1d/2d's running
// statistics over 10 steps with momentum 0.1 and None, an empty batch between two steps), gradcheck and gradgradcheck in float64,
// a reference built from tg ops on a large input (the streaming-store path), thread-count
// determinism, the modules' buffers and options, and errors.
#include <optional>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

const tg::testing::FixtureCase& bn_fixture(const std::string& name) { return tg::testing::fixture("batch_norm.txt", name); }

// y of batch_norm from tg ops: (x − μ)/√(σ² + ε)·γ + β over dims {0, 2..}, the definition.
Tensor reference_batch_norm(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                            const Tensor& bias, double eps) {
  const int64_t C = x.shape()[1];
  Shape per_channel(x.shape().size(), 1);
  per_channel[1] = C;
  Tensor y = (x - mean.reshape(per_channel)) * (var.reshape(per_channel) + eps).rsqrt();
  if (weight.defined()) y = y * weight.reshape(per_channel);
  if (bias.defined()) y = y + bias.reshape(per_channel);
  return y;
}

// The dims a channel's statistics run over: 0 and 2.. of x.
std::vector<int64_t> channel_dims(const Tensor& x) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A module case's options: its momentum, −1 for None (the cumulative average).
tg::nn::BatchNormOptions fixture_options(const tg::testing::FixtureCase& c) {
  const double momentum = c.scalar("momentum");
  return {.momentum = momentum < 0 ? std::nullopt : std::optional(momentum)};
}

// run(bn) on the BatchNorm1d or BatchNorm2d the case's name starts with.
template <typename Run>
void run_on_module(const std::string& base, int64_t C, const tg::nn::BatchNormOptions& options, const Run& run) {
  if (base.rfind("batchnorm2d", 0) == 0) {
    tg::nn::BatchNorm2d bn(C, options);
    run(bn);
  } else {
    tg::nn::BatchNorm1d bn(C, options);
    run(bn);
  }
}

}  // namespace

TEST_CASE("batch_norm in training mode matches PyTorch's output and gradients", "[batch_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "bn_train_4x3", "bn_train_2x3x5", "bn_train_3x2x4x5",
                                    "bn_train_2x4x3x3_noaffine", "bn_train_5x2x1x1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const auto& c = bn_fixture(base + suffix);
  const double atol = fixture_atol(suffix) * 10;  // values up to ~10 in the backward
  Tensor x = leaf(c.at("x"));
  const bool affine = c.has("weight");
  Tensor weight = affine ? leaf(c.at("weight")) : Tensor(), bias = affine ? leaf(c.at("bias")) : Tensor();
  const int64_t C = x.shape()[1];
  Tensor running_mean = tg::zeros({C}, x.dtype()), running_var = tg::ones({C}, x.dtype());
  Tensor y = F::batch_norm(x, running_mean, running_var,
                           {.weight = weight, .bias = bias, .training = true, .eps = c.scalar("eps")});
  REQUIRE(std::string(y.grad_fn_name()) == "BatchNormBackward");
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  if (affine) {
    TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
    TG_REQUIRE_CLOSE(bias.grad(), c.at("dbias"), atol);
  }
  // The running stats moved by momentum 0.1 toward the batch's mean and unbiased variance.
  const Tensor xd = c.at("x").to(tg::kFloat64);
  TG_REQUIRE_CLOSE(running_mean.to(tg::kFloat64), xd.mean(channel_dims(xd)) * 0.1, atol);
  TG_REQUIRE_CLOSE(running_var.to(tg::kFloat64), xd.var(channel_dims(xd), true) * 0.1 + 0.9, atol);
}

TEST_CASE("batch_norm in eval mode matches PyTorch's output and gradients", "[batch_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "bn_eval_4x3", "bn_eval_2x3x4x4", "bn_eval_2x2x3_noaffine");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const auto& c = bn_fixture(base + suffix);
  const double atol = fixture_atol(suffix);
  Tensor x = leaf(c.at("x"));
  const bool affine = c.has("weight");
  Tensor weight = affine ? leaf(c.at("weight")) : Tensor(), bias = affine ? leaf(c.at("bias")) : Tensor();
  const Tensor running_mean = c.at("running_mean").clone(), running_var = c.at("running_var").clone();
  Tensor y = F::batch_norm(x, running_mean, running_var, {.weight = weight, .bias = bias});
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  if (affine) {
    TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
    TG_REQUIRE_CLOSE(bias.grad(), c.at("dbias"), atol);
  }
  // Eval mode leaves the running statistics alone.
  REQUIRE(bytes(running_mean) == bytes(c.at("running_mean")));
  REQUIRE(bytes(running_var) == bytes(c.at("running_var")));
}

TEST_CASE("BatchNorm1d/2d's running statistics over 10 steps match PyTorch, momentum 0.1 and None",
          "[batch_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "batchnorm2d_steps_3x2x3x3_m0p1", "batchnorm2d_steps_3x2x3x3_mNone",
                                    "batchnorm1d_steps_4x3x2_m0p3", "batchnorm1d_steps_5x3_mNone");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const auto& c = bn_fixture(base + suffix);
  const double atol = fixture_atol(suffix) * 10;
  const tg::nn::BatchNormOptions options = fixture_options(c);
  const int64_t C = c.at("weight").numel();
  auto run = [&](tg::nn::BatchNormBase& bn) {
    bn.to(fixture_dtype(suffix));
    bn.weight = c.at("weight");
    bn.bias = c.at("bias");
    Tensor y_train;
    for (int i = 0; i < 10; ++i) y_train = bn(c.at("x" + std::to_string(i)));
    TG_REQUIRE_CLOSE(y_train, c.at("y_train"), atol);
    TG_REQUIRE_CLOSE(bn.running_mean, c.at("running_mean"), atol);
    TG_REQUIRE_CLOSE(bn.running_var, c.at("running_var"), atol);
    REQUIRE(bn.num_batches_tracked.dtype() == tg::kInt64);
    REQUIRE(bn.num_batches_tracked.item<int64_t>() == c.ints("num_batches_tracked")[0]);
    bn.eval();
    TG_REQUIRE_CLOSE(bn(c.at("x_eval")), c.at("y_eval"), atol);
    REQUIRE(bn.num_batches_tracked.item<int64_t>() == 10);  // eval steps are not counted
  };
  run_on_module(base, C, options, run);
}

TEST_CASE("BatchNorm1d/2d take an empty batch as PyTorch: empty output, running stats kept, counted, zero grads",
          "[batch_norm][fixture]") {
  const std::string base =
      GENERATE(as<std::string>{}, "batchnorm1d_empty_0x3_m0p1", "batchnorm1d_empty_0x3x5_mNone",
               "batchnorm1d_empty_2x3x0_m0p1", "batchnorm2d_empty_0x3x2x3_mNone", "batchnorm2d_empty_2x3x0x4_m0p1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const auto& c = bn_fixture(base + suffix);
  const double atol = fixture_atol(suffix) * 10;
  const tg::nn::BatchNormOptions options = fixture_options(c);
  auto run = [&](tg::nn::BatchNormBase& bn) {
    bn.to(fixture_dtype(suffix));
    bn.weight = c.at("weight");
    bn.bias = c.at("bias");
    bn(c.at("x0"));
    const Tensor running_mean = bn.running_mean.clone(), running_var = bn.running_var.clone();
    const Tensor x_empty = tg::zeros(Shape(c.ints("empty_shape")), fixture_dtype(suffix)).requires_grad_();
    const Tensor y_empty = bn(x_empty);
    REQUIRE(y_empty.shape() == x_empty.shape());
    (y_empty * 3.0).sum().backward();
    // Unchanged to the bit (no update at all, not an update by zero), and the batch counted.
    REQUIRE(bytes(bn.running_mean) == bytes(running_mean));
    REQUIRE(bytes(bn.running_var) == bytes(running_var));
    TG_REQUIRE_CLOSE(bn.running_mean, c.at("running_mean_empty"), atol);
    TG_REQUIRE_CLOSE(bn.running_var, c.at("running_var_empty"), atol);
    REQUIRE(bn.num_batches_tracked.item<int64_t>() == c.ints("num_batches_tracked_empty")[0]);
    REQUIRE(bn.num_batches_tracked.item<int64_t>() == 2);
    TG_REQUIRE_CLOSE(bn.weight.grad(), c.at("weight_grad"), 0.0);  // exactly 0
    TG_REQUIRE_CLOSE(bn.bias.grad(), c.at("bias_grad"), 0.0);
    REQUIRE(x_empty.grad().shape() == x_empty.shape());
    // The next batch: with momentum = None the empty one counted, so x1 gets weight 1/3, not 1/2.
    TG_REQUIRE_CLOSE(bn(c.at("x1")), c.at("y1"), atol);
    TG_REQUIRE_CLOSE(bn.running_mean, c.at("running_mean"), atol);
    TG_REQUIRE_CLOSE(bn.running_var, c.at("running_var"), atol);
    REQUIRE(bn.num_batches_tracked.item<int64_t>() == c.ints("num_batches_tracked")[0]);
    // Eval mode takes an empty batch too.
    bn.eval();
    REQUIRE(bn(x_empty.detach()).shape() == x_empty.shape());
  };
  const int64_t C = c.at("weight").numel();
  run_on_module(base, C, options, run);
}

TEST_CASE("F::batch_norm of an empty batch: empty output and zero gradients, twice differentiable",
          "[batch_norm][gradcheck]") {
  const Shape shape = GENERATE(Shape{0, 3}, Shape{0, 3, 4}, Shape{2, 3, 0}, Shape{0, 3, 2, 2});
  const bool training = GENERATE(true, false);
  CAPTURE(shape, training);
  const Tensor x = tg::zeros(shape, tg::kFloat64).requires_grad_();
  const Tensor weight = tg::full({3}, 2.0, tg::kFloat64).requires_grad_();
  const Tensor bias = tg::ones({3}, tg::kFloat64).requires_grad_();
  const Tensor running_mean = tg::full({3}, 0.5, tg::kFloat64), running_var = tg::full({3}, 2.0, tg::kFloat64);
  const Tensor y = F::batch_norm(x, running_mean, running_var, {.weight = weight, .bias = bias, .training = training});
  REQUIRE(y.shape() == shape);
  TG_REQUIRE_CLOSE(running_mean, tg::full({3}, 0.5, tg::kFloat64), 0.0);
  TG_REQUIRE_CLOSE(running_var, tg::full({3}, 2.0, tg::kFloat64), 0.0);
  const std::vector<Tensor> grads =
      tg::autograd::grad({y.sum()}, {x, weight, bias}, {}, {.create_graph = true});
  REQUIRE(grads[0].shape() == shape);
  TG_REQUIRE_CLOSE(grads[1], tg::zeros({3}, tg::kFloat64), 0.0);
  TG_REQUIRE_CLOSE(grads[2], tg::zeros({3}, tg::kFloat64), 0.0);
  // Differentiated again (the recorded composite backward): still zero, no NaN.
  const std::vector<Tensor> second = tg::autograd::grad({grads[1].sum()}, {weight}, {}, {.allow_unused = true});
  if (second[0].defined()) TG_REQUIRE_CLOSE(second[0], tg::zeros({3}, tg::kFloat64), 0.0);
  // Without running statistics too.
  if (training) REQUIRE(F::batch_norm(x, Tensor(), Tensor(), {.training = true}).shape() == shape);
}

TEST_CASE("batch_norm passes gradcheck and gradgradcheck in float64", "[batch_norm][gradcheck]") {
  const Shape shape = GENERATE(Shape{4, 3}, Shape{3, 2, 5}, Shape{2, 3, 2, 3});
  const bool training = GENERATE(true, false);
  const bool affine = GENERATE(true, false);
  CAPTURE(shape, training, affine);
  tg::manual_seed(7);
  const int64_t C = shape[1];
  const Tensor x = (tg::randn(shape, tg::kFloat64) * 2 + 1).requires_grad_();
  const Tensor weight = (tg::randn({C}, tg::kFloat64) * 0.5 + 1).requires_grad_();
  const Tensor bias = tg::randn({C}, tg::kFloat64).requires_grad_();
  const Tensor running_mean = tg::randn({C}, tg::kFloat64), running_var = tg::rand({C}, tg::kFloat64) + 0.5;
  // Training updates the running stats in place: each evaluation gets copies, so the function is pure.
  auto fn = [&](const std::vector<Tensor>& in) {
    return F::batch_norm(in[0], running_mean.clone(), running_var.clone(),
                         {.weight = affine ? in[1] : Tensor(), .bias = affine ? in[2] : Tensor(), .training = training});
  };
  const std::vector<Tensor> inputs = {x, weight, bias};
  TG_REQUIRE_GRADCHECK(fn, inputs);
  const tg::GradcheckResult second = tg::gradgradcheck(fn, inputs);
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("batch_norm agrees with its definition on a large input, and its backward with autograd's",
          "[batch_norm]") {
  // 16.6 MB of float32: y and dx are written with streaming stores, channels in several chunks.
  tg::manual_seed(3);
  const Tensor x = (tg::randn({16, 8, 180, 180}) * 3 + 5).requires_grad_();
  const Tensor weight = (tg::randn({8}) * 0.5 + 1).requires_grad_(), bias = tg::randn({8}).requires_grad_();
  const Tensor y = F::batch_norm(x, Tensor(), Tensor(), {.weight = weight, .bias = bias, .training = true});
  const Tensor dy = tg::randn(x.shape());
  y.backward(dy);
  // The definition in float64 tg ops, differentiated by autograd.
  const Tensor x64 = x.detach().to(tg::kFloat64).requires_grad_();
  const Tensor w64 = weight.detach().to(tg::kFloat64).requires_grad_(), b64 = bias.detach().to(tg::kFloat64).requires_grad_();
  const Tensor y64 = reference_batch_norm(x64, x64.mean({0, 2, 3}), x64.var({0, 2, 3}, false), w64, b64, 1e-5);
  y64.backward(dy.to(tg::kFloat64));
  CHECK(relative_error(y, y64) < 1e-6);
  CHECK(relative_error(x.grad(), x64.grad()) < 1e-5);
  CHECK(relative_error(weight.grad(), w64.grad()) < 1e-5);
  CHECK(relative_error(bias.grad(), b64.grad()) < 1e-5);
}

TEST_CASE("batch_norm is bitwise identical at any thread count", "[batch_norm][threads]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const bool training = GENERATE(true, false);
  // 5 channels: chunks of a group of channels in parallel; 12: whole channels per task.
  const int64_t C = GENERATE(5, 12);
  CAPTURE(training, C);
  tg::manual_seed(11);
  // Several chunks per channel (N·S = 36 096 > 16 384) and an S that is not a multiple of the lanes.
  const Tensor x_values = tg::randn({16, C, 48, 47}, dtype) + 2;
  const Tensor dy = tg::randn(x_values.shape(), dtype);
  const Tensor weight_values = tg::randn({C}, dtype), bias_values = tg::randn({C}, dtype);
  require_bitwise_identical_across_threads([&] {
    Tensor x = leaf(x_values), weight = leaf(weight_values), bias = leaf(bias_values);
    Tensor running_mean = tg::zeros({C}, dtype), running_var = tg::ones({C}, dtype);
    Tensor y = F::batch_norm(x, running_mean, running_var,
                             {.weight = weight, .bias = bias, .training = training});
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)},          {"dx", bytes(x.grad())},           {"dweight", bytes(weight.grad())},
        {"dbias", bytes(bias.grad())}, {"running_mean", bytes(running_mean)}, {"running_var", bytes(running_var)}};
  });
}

TEST_CASE("BatchNorm modules: buffers, options, train and eval", "[batch_norm][module]") {
  tg::nn::BatchNorm2d bn(3);
  REQUIRE(bn.state_dict().keys() ==
          std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  REQUIRE(bn.parameters().size() == 2);
  REQUIRE(bn.buffers().size() == 3);
  REQUIRE(!bn.running_mean.requires_grad());
  REQUIRE(tg::testing::values(bn.running_var) == std::vector<double>{1, 1, 1});

  // to(float64) converts the running statistics; the counter stays int64.
  const Tensor mean_handle = bn.running_mean;
  bn.to(tg::kFloat64);
  REQUIRE(bn.running_mean.dtype() == tg::kFloat64);
  REQUIRE(mean_handle.dtype() == tg::kFloat64);  // the same tensor, converted in place
  REQUIRE(bn.num_batches_tracked.dtype() == tg::kInt64);

  // A copy shares the buffers: training it moves the original's statistics too.
  tg::nn::BatchNorm2d copy = bn;
  copy(tg::randn({2, 3, 2, 2}, tg::kFloat64) + 4);
  REQUIRE(bn.num_batches_tracked.item<int64_t>() == 1);
  REQUIRE(bn.running_mean.to_vector<double>()[0] > 0.2);

  // Assignment copies values in: the target keeps its own buffers.
  tg::nn::BatchNorm2d other(3);
  other.to(tg::kFloat64);
  other = bn;
  REQUIRE(!other.running_mean.is_same(bn.running_mean));
  REQUIRE(other.running_mean.to_vector<double>() == bn.running_mean.to_vector<double>());
  REQUIRE(other.num_batches_tracked.item<int64_t>() == 1);
  bn(tg::randn({2, 3, 2, 2}, tg::kFloat64));
  REQUIRE(other.num_batches_tracked.item<int64_t>() == 1);

  // reset_running_stats
  bn.reset_running_stats();
  REQUIRE(bn.running_mean.to_vector<double>() == std::vector<double>{0, 0, 0});
  REQUIRE(bn.num_batches_tracked.item<int64_t>() == 0);

  // Without affine: no parameters; without running stats: no buffers, batch stats in eval too.
  tg::nn::BatchNorm1d plain(4, {.affine = false, .track_running_stats = false});
  REQUIRE(plain.parameters().empty());
  REQUIRE(plain.buffers().empty());
  REQUIRE(plain.state_dict().empty());
  plain.eval();
  const Tensor x = tg::randn({6, 4}) * 3 + 2;
  const Tensor y = plain(x);
  TG_REQUIRE_CLOSE(y, reference_batch_norm(x, x.mean({0}), x.var({0}, false), Tensor(), Tensor(), 1e-5), 1e-5);
}

TEST_CASE("batch_norm refuses bad input, naming the shapes", "[batch_norm][errors]") {
  using Catch::Contains;
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({3}), tg::zeros({3}), tg::ones({3})),
                   Contains("batch_norm") && Contains("at least 2 dims") && Contains("[3]"));
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({4, 3, 5}), tg::zeros({4}), tg::ones({3})),
                   Contains("running_mean") && Contains("[3]") && Contains("[4]") && Contains("[4, 3, 5]"));
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({4, 3}), tg::zeros({3}), tg::ones({3}), {.weight = tg::ones({4})}),
                   Contains("weight") && Contains("[4]"));
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({4, 3}), tg::zeros({3}, tg::kFloat64), tg::ones({3})),
                   Contains("dtypes differ"));
  // Exactly one value per channel is refused (its variance is undefined), as PyTorch, for each rank.
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({1, 3}), tg::zeros({3}), tg::ones({3}), {.training = true}),
                   Contains("more than 1 value per channel") && Contains("[1, 3]"));
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({1, 3, 1}), Tensor(), Tensor(), {.training = true}),
                   Contains("more than 1 value per channel") && Contains("[1, 3, 1]"));
  REQUIRE_TG_ERROR(tg::nn::BatchNorm2d(3)(tg::zeros({1, 3, 1, 1})),
                   Contains("more than 1 value per channel") && Contains("[1, 3, 1, 1]"));
  REQUIRE(tg::nn::BatchNorm2d(3).eval()(tg::zeros({1, 3, 1, 1})).shape() == Shape{1, 3, 1, 1});  // eval: fine
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({4, 3}), Tensor(), Tensor(), {.training = true, .eps = -1e-3}),
                   Contains("batch_norm") && Contains("eps must be finite and ≥ 0"));
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({4, 3}), Tensor(), Tensor()), Contains("evaluation mode"));
  REQUIRE_TG_ERROR(F::batch_norm(tg::zeros({4, 3}, tg::kInt64), Tensor(), Tensor(), {.training = true}),
                   Contains("float32 or float64"));
  tg::nn::BatchNorm2d bn2(3);
  REQUIRE_TG_ERROR(bn2(tg::zeros({3, 4, 4})), Contains("BatchNorm2d") && Contains("expected 4D input") &&
                                                   Contains("[3, 4, 4]"));
  tg::nn::BatchNorm1d bn1(3);
  REQUIRE_TG_ERROR(bn1(tg::zeros({2, 3, 4, 4})), Contains("BatchNorm1d") && Contains("2D or 3D"));
  REQUIRE_TG_ERROR(bn1(tg::zeros({2, 4})), Contains("running_mean") && Contains("[3]") && Contains("[2, 4]"));
  REQUIRE_TG_ERROR(tg::nn::BatchNorm2d(0), Contains("BatchNorm2d") && Contains("num_features"));
}
