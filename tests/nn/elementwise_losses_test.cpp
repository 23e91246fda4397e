// mse_loss, l1_loss, smooth_l1_loss, huber_loss and the binary cross-entropies beyond the PyTorch
// fixtures (loss_reference_test.cpp): gradcheck with respect to input and target in float64,
// values by hand, errors naming their arguments, determinism across thread counts.
#include <cmath>
#include <functional>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using tg::nn::Reduction;
using namespace tg::nn_test;

namespace {

using Loss = std::function<Tensor(const Tensor&, const Tensor&, Reduction)>;

// The losses of a difference, by name, for GENERATE.
Loss difference_loss(const std::string& name) {
  if (name == "mse_loss") return [](const Tensor& x, const Tensor& y, Reduction r) { return tg::nn::mse_loss(x, y, r); };
  if (name == "l1_loss") return [](const Tensor& x, const Tensor& y, Reduction r) { return tg::nn::l1_loss(x, y, r); };
  if (name == "smooth_l1_loss")
    return [](const Tensor& x, const Tensor& y, Reduction r) { return tg::nn::smooth_l1_loss(x, y, r, 0.7); };
  return [](const Tensor& x, const Tensor& y, Reduction r) { return tg::nn::huber_loss(x, y, r, 0.6); };
}

}  // namespace

TEST_CASE("elementwise losses pass gradcheck in float64, for input and target", "[loss][gradcheck]") {
  tg::manual_seed(41);
  const Reduction reduction = GENERATE(Reduction::None, Reduction::Mean, Reduction::Sum);
  SECTION("the losses of a difference") {
    const std::string name = GENERATE(as<std::string>{}, "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss");
    CAPTURE(name);
    const Loss loss = difference_loss(name);
    // Differences of 0.1 ... 2.3 in magnitude: away from the kinks at 0 and at beta / delta, where
    // finite differences straddle two pieces.
    const Tensor target = tg::randn({3, 4}, tg::kFloat64).requires_grad_();
    const Tensor input = (target.detach() + tg::tensor({0.1, -0.3, 0.5, -0.9, 1.1, -1.3, 1.5, -1.7, 1.9, -2.1, 0.2, -2.3},
                                                       {3, 4}, tg::kFloat64))
                             .requires_grad_();
    TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return loss(in[0], in[1], reduction); },
                         (std::vector<Tensor>{input, target}));
  }
  SECTION("binary_cross_entropy with a broadcast weight") {
    const Tensor weight = tg::rand({4}, tg::kFloat64) + 0.5;
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return tg::nn::binary_cross_entropy(in[0], in[1], weight, reduction); },
        (std::vector<Tensor>{(tg::rand({3, 4}, tg::kFloat64) * 0.8 + 0.1).requires_grad_(),
                             tg::rand({3, 4}, tg::kFloat64).requires_grad_()}));
  }
  SECTION("binary_cross_entropy_with_logits with weight and pos_weight") {
    const Tensor weight = tg::rand({3, 1}, tg::kFloat64) + 0.5;
    const Tensor pos_weight = tg::rand({4}, tg::kFloat64) * 3.0;
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return tg::nn::binary_cross_entropy_with_logits(in[0], in[1], weight, pos_weight, reduction);
        },
        (std::vector<Tensor>{(tg::randn({3, 4}, tg::kFloat64) * 4.0).requires_grad_(),
                             tg::rand({3, 4}, tg::kFloat64).requires_grad_()}));
  }
}

TEST_CASE("elementwise losses by hand", "[loss]") {
  const Tensor input = tg::tensor({0.0, 0.5, 3.0}, {}, tg::kFloat64);
  const Tensor target = tg::zeros({3}, tg::kFloat64);
  // d = 0, 0.5, 3
  REQUIRE(tg::testing::values(tg::nn::l1_loss(input, target, Reduction::None)) == std::vector<double>{0.0, 0.5, 3.0});
  REQUIRE(tg::nn::mse_loss(input, target, Reduction::Sum).item() == 9.25);
  // smooth_l1, beta = 1: 0, 0.5²/2, 3 − 0.5;  huber, delta = 2: 0, 0.5²/2, 2·(3 − 1)
  REQUIRE(tg::testing::values(tg::nn::smooth_l1_loss(input, target, Reduction::None)) ==
          std::vector<double>{0.0, 0.125, 2.5});
  REQUIRE(tg::testing::values(tg::nn::huber_loss(input, target, Reduction::None, 2.0)) ==
          std::vector<double>{0.0, 0.125, 4.0});
  // huber(delta) = delta · smooth_l1(beta = delta)
  REQUIRE(std::fabs(tg::nn::huber_loss(input, target, Reduction::Mean, 0.7).item() -
                    0.7 * tg::nn::smooth_l1_loss(input, target, Reduction::Mean, 0.7).item()) < 1e-15);
  // binary_cross_entropy(0.5, t) = log 2 for any t; an input of 0 with target 1 is clamped to 100.
  REQUIRE(std::fabs(tg::nn::binary_cross_entropy(tg::full({2}, 0.5, tg::kFloat64), tg::tensor({0.0, 0.3}, {}, tg::kFloat64))
                        .item() -
                    std::log(2.0)) < 1e-15);
  REQUIRE(tg::nn::binary_cross_entropy(tg::zeros({1}, tg::kFloat64), tg::ones({1}, tg::kFloat64)).item() == 100.0);
  // with_logits(x, t) = binary_cross_entropy(σ(x), t) where σ(x) is not 0 or 1, and stays finite at ±1000.
  const Tensor logits = tg::tensor({-2.0, 0.3, 1.7}, {}, tg::kFloat64);
  const Tensor probabilities = tg::tensor({0.2, 0.9, 0.5}, {}, tg::kFloat64);
  const Tensor sigmoid = 1.0 / (1.0 + tg::exp(-logits));
  REQUIRE(std::fabs(tg::nn::binary_cross_entropy_with_logits(logits, probabilities).item() -
                    tg::nn::binary_cross_entropy(sigmoid, probabilities).item()) < 1e-15);
  REQUIRE(tg::nn::binary_cross_entropy_with_logits(tg::tensor({1000.0, -1000.0}, {}, tg::kFloat64),
                                                   tg::tensor({0.0, 1.0}, {}, tg::kFloat64), {}, {}, Reduction::Sum)
              .item() == 2000.0);
  // The F:: names are the same functions.
  REQUIRE(F::huber_loss(input, target, Reduction::Sum, 2.0).item() == 4.125);
}

TEST_CASE("elementwise losses reject invalid arguments, naming them", "[loss][errors]") {
  const Tensor x = tg::rand({3, 4});
  // Shapes that PyTorch would broadcast (with a warning) are refused, both shapes named.
  const std::string name = GENERATE(as<std::string>{}, "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss");
  CAPTURE(name);
  const Loss loss = difference_loss(name);
  REQUIRE_TG_ERROR(loss(x, tg::rand({3, 1}), Reduction::Mean),
                   Catch::StartsWith(name) && Catch::Contains("[3, 4]") && Catch::Contains("[3, 1]"));
  REQUIRE_TG_ERROR(loss(x, tg::rand({3, 4}, tg::kFloat64), Reduction::Mean),
                   Catch::StartsWith(name) && Catch::Contains("float64"));
  REQUIRE_TG_ERROR(loss(tg::ones({3}, tg::kInt64), tg::ones({3}, tg::kInt64), Reduction::Mean),
                   Catch::StartsWith(name + ": not implemented for int64"));
  REQUIRE_TG_ERROR(loss(x, Tensor(), Reduction::Mean), Catch::StartsWith(name) && Catch::Contains("undefined"));

  REQUIRE_TG_ERROR(tg::nn::smooth_l1_loss(x, x, Reduction::Mean, -1.0),
                   Catch::StartsWith("smooth_l1_loss") && Catch::Contains("beta") && Catch::Contains("-1"));
  REQUIRE_TG_ERROR(tg::nn::huber_loss(x, x, Reduction::Mean, 0.0),
                   Catch::StartsWith("huber_loss") && Catch::Contains("delta") && Catch::Contains("0"));
  REQUIRE_TG_ERROR(tg::nn::binary_cross_entropy(x + 1.0, x),
                   Catch::StartsWith("binary_cross_entropy") && Catch::Contains("between 0 and 1") &&
                       Catch::Contains("index 0"));
  REQUIRE_TG_ERROR(tg::nn::binary_cross_entropy(x, tg::rand({4})),
                   Catch::Contains("[3, 4]") && Catch::Contains("[4]"));
  REQUIRE_TG_ERROR(tg::nn::binary_cross_entropy(x, x, tg::ones({2})),
                   Catch::StartsWith("binary_cross_entropy") && Catch::Contains("[2]") && Catch::Contains("[3, 4]"));
  REQUIRE_TG_ERROR(tg::nn::binary_cross_entropy_with_logits(x, x, {}, tg::ones({3})),
                   Catch::StartsWith("binary_cross_entropy_with_logits") && Catch::Contains("pos_weight"));
  REQUIRE_TG_ERROR(tg::nn::binary_cross_entropy_with_logits(x, x, tg::ones({4}).requires_grad_()),
                   Catch::Contains("weight") && Catch::Contains("constant"));
  REQUIRE_TG_ERROR(tg::nn::binary_cross_entropy_with_logits(x, x, tg::ones({4}, tg::kFloat64)),
                   Catch::Contains("weight") && Catch::Contains("float64"));
}

TEST_CASE("elementwise losses are bitwise identical at any thread count", "[loss][threads]") {
  tg::manual_seed(5);
  const Tensor input = tg::rand({512, 512});
  const Tensor target = tg::rand({512, 512});
  require_bitwise_identical_across_threads([&] {
    Tensor x = input.clone().requires_grad_();
    const Tensor huber = tg::nn::huber_loss(x, target, Reduction::Mean, 0.3);
    const Tensor bce = tg::nn::binary_cross_entropy_with_logits(x, target, {}, tg::full({512}, 2.0));
    (huber + bce).backward();
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"huber", bytes(huber)}, {"bce", bytes(bce)}, {"dx", bytes(x.grad())}};
  });
}
