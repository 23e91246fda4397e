// cross_entropy and nll_loss beyond the PyTorch fixtures (loss_reference_test.cpp): gradcheck of
// every form in float64, values derived by hand, errors naming their arguments, and results
// bitwise identical at any thread count.
#include <cmath>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using tg::nn::Reduction;
using namespace tg::nn_test;

namespace {

Tensor classes(const std::vector<double>& values, const Shape& shape = {}) {
  return tg::tensor(values, shape, tg::kInt64);
}

}  // namespace

TEST_CASE("cross_entropy and nll_loss pass gradcheck in float64", "[loss][cross_entropy][gradcheck]") {
  tg::manual_seed(14);
  const Reduction reduction = GENERATE(Reduction::None, Reduction::Mean, Reduction::Sum);
  const Tensor weight = tg::rand({4}, tg::kFloat64) + 0.5;
  SECTION("class indices with weights, ignore_index and label smoothing") {
    const Tensor target = classes({0, -100, 3, 1, 2});
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return tg::nn::cross_entropy(in[0], target,
                                       {.weight = weight, .reduction = reduction, .label_smoothing = 0.3});
        },
        std::vector<Tensor>{randn_leaf({5, 4}, tg::kFloat64)});
  }
  SECTION("spatial dims [N, C, d1, d2], unweighted smoothing with an ignored target") {
    const Tensor target = classes({0, 3, 1, 2, 2, 1, 7, 0, 3, 3, 1, 0}, {2, 3, 2});
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return tg::nn::cross_entropy(in[0], target,
                                       {.ignore_index = 7, .reduction = reduction, .label_smoothing = 0.2});
        },
        std::vector<Tensor>{randn_leaf({2, 4, 3, 2}, tg::kFloat64)});
  }
  SECTION("probability targets, with respect to input and target") {
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return tg::nn::cross_entropy(in[0], in[1],
                                       {.weight = weight, .reduction = reduction, .label_smoothing = 0.1});
        },
        (std::vector<Tensor>{randn_leaf({2, 4, 3}, tg::kFloat64), tg::rand({2, 4, 3}, tg::kFloat64).requires_grad_()}));
  }
  SECTION("nll_loss with weights and ignore_index, unbatched and batched") {
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return tg::nn::nll_loss(in[0], classes({2, 1, 1}), {.weight = weight, .ignore_index = 1, .reduction = reduction});
        },
        std::vector<Tensor>{randn_leaf({3, 4}, tg::kFloat64)});
    TG_REQUIRE_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return tg::nn::nll_loss(in[0], tg::scalar_tensor(3, tg::kInt64), {.weight = weight, .reduction = reduction});
        },
        std::vector<Tensor>{randn_leaf({4}, tg::kFloat64)});
  }
}

TEST_CASE("cross_entropy by hand", "[loss][cross_entropy]") {
  // Uniform logits: every −log p_c = log C, so the smoothing term is C·log C per row and
  // (1 − ε)·log C + ε/C · C·log C = log C whatever ε.
  const Tensor uniform = tg::zeros({2, 4}, tg::kFloat64);
  REQUIRE(std::fabs(tg::nn::cross_entropy(uniform, {3, 0}, {.label_smoothing = 0.4}).item() - std::log(4.0)) < 1e-15);
  // Sum of two rows; none gives each.
  REQUIRE(std::fabs(tg::nn::cross_entropy(uniform, {3, 0}, {.reduction = Reduction::Sum}).item() - 2 * std::log(4.0)) <
          1e-15);
  const Tensor per_row = tg::nn::cross_entropy(uniform, {3, 0}, {.reduction = Reduction::None});
  REQUIRE(per_row.shape() == Shape{2});
  // Weighted mean: (w3·log 4 + w0·log 4) / (w3 + w0) = log 4; an ignored row contributes 0.
  const Tensor weight = tg::tensor({1, 2, 3, 4}, {}, tg::kFloat64);
  REQUIRE(std::fabs(tg::nn::cross_entropy(uniform, {3, 0}, {.weight = weight}).item() - std::log(4.0)) < 1e-15);
  const Tensor ignored = tg::nn::cross_entropy(uniform, {3, -100}, {.reduction = Reduction::None});
  REQUIRE(tg::testing::values(ignored)[1] == 0.0);
  // A one-hot probability target is the class-index loss.
  const Tensor logits = tg::tensor({0.5, -1.0, 2.0}, {1, 3}, tg::kFloat64);
  const double by_class = tg::nn::cross_entropy(logits, {2}).item();
  const double by_probability = tg::nn::cross_entropy(logits, tg::tensor({0, 0, 1}, {1, 3}, tg::kFloat64)).item();
  REQUIRE(std::fabs(by_class - by_probability) < 1e-15);
  // nll_loss of log-probabilities: −mean(log p[y]).
  REQUIRE(tg::nn::nll_loss(tg::tensor({-1, -2, -3, -4}, {2, 2}, tg::kFloat64), classes({1, 0})).item() == 2.5);
  // One tape node each, named after the form.
  const Tensor x = tg::randn({2, 3}).requires_grad_();
  REQUIRE(std::string(tg::nn::cross_entropy(x, {0, 2}).grad_fn_name()) == "CrossEntropyBackward");
  REQUIRE(std::string(tg::nn::cross_entropy(x, tg::rand({2, 3})).grad_fn_name()) == "CrossEntropyProbBackward");
  REQUIRE(std::string(tg::nn::nll_loss(x, classes({0, 2})).grad_fn_name()) == "NllLossBackward");
  // The F:: names are the same functions.
  REQUIRE(F::nll_loss(tg::tensor({-1, -2}, {}, tg::kFloat64), tg::scalar_tensor(1, tg::kInt64)).item() == 2.0);
}

TEST_CASE("cross_entropy and nll_loss reject invalid arguments, naming them", "[loss][cross_entropy][errors]") {
  const Tensor logits = tg::randn({3, 4});
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, {0, 1, 2}, {.label_smoothing = 1.5}),
                   Catch::Contains("cross_entropy") && Catch::Contains("label_smoothing") && Catch::Contains("1.5"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, {0, 1, 2}, {.label_smoothing = -0.1}),
                   Catch::Contains("label_smoothing") && Catch::Contains("-0.1"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, {0, 1, 2}, {.weight = tg::ones({3})}),
                   Catch::Contains("cross_entropy") && Catch::Contains("weight") && Catch::Contains("[4]") &&
                       Catch::Contains("[3]"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, {0, 1, 2}, {.weight = tg::ones({4}, tg::kFloat64)}),
                   Catch::Contains("weight") && Catch::Contains("float64"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, {0, 1, 2}, {.weight = tg::ones({4}).requires_grad_()}),
                   Catch::Contains("weight") && Catch::Contains("constant"));
  // An in-range class index other than ignore_index, and ignore_index itself, are both accepted.
  REQUIRE_NOTHROW(tg::nn::cross_entropy(logits, {0, 9, 2}, {.ignore_index = 9}));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, {0, 9, 2}),
                   Catch::Contains("target 9") && Catch::Contains("index 1") && Catch::Contains("ignore_index -100"));
  // Spatial: the target must be [N, d1]; the offending flat index is named.
  const Tensor spatial = tg::randn({2, 3, 5});
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(spatial, classes({0, 1}, {2})),
                   Catch::Contains("[2, 5]") && Catch::Contains("[2, 3, 5]") && Catch::Contains("[2]"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(spatial, classes({0, 1, 2, 0, 1, 2, 0, 3, 1, 1}, {2, 5})),
                   Catch::Contains("target 3") && Catch::Contains("index 7") && Catch::Contains("[0, 3)"));
  // Probability targets: input's dtype, no ignore_index.
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, tg::rand({3, 4}, tg::kFloat64)),
                   Catch::Contains("probabilit") && Catch::Contains("float64"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(logits, tg::rand({3, 4}), {.ignore_index = 1}),
                   Catch::Contains("ignore_index") && Catch::Contains("probabilit"));
  REQUIRE_TG_ERROR(tg::nn::cross_entropy(tg::scalar_tensor(1.0), tg::scalar_tensor(0, tg::kInt64)),
                   Catch::Contains("cross_entropy") && Catch::Contains("[C]"));
  // nll_loss: the same checks under its own name.
  REQUIRE_TG_ERROR(tg::nn::nll_loss(logits, classes({0, 4, 1})),
                   Catch::StartsWith("nll_loss") && Catch::Contains("target 4") && Catch::Contains("index 1"));
  REQUIRE_TG_ERROR(tg::nn::nll_loss(logits, tg::tensor({0, 1, 2})), Catch::StartsWith("nll_loss") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(tg::nn::nll_loss(tg::ones({3, 4}, tg::kInt64), classes({0, 1, 2})),
                   Catch::StartsWith("nll_loss: not implemented for int64"));
  REQUIRE_TG_ERROR(tg::nn::nll_loss(logits, Tensor()), Catch::Contains("nll_loss") && Catch::Contains("undefined"));
}

TEST_CASE("class losses are bitwise identical at any thread count", "[loss][cross_entropy][threads]") {
  // 4096 rows of 64 classes: 16 chunks, so the partial sums really are spread over threads.
  tg::manual_seed(3);
  const Tensor logits = tg::randn({4096, 64});
  const Tensor target = tg::randint(0, 64, {4096});
  const Tensor probabilities = tg::rand({64, 64, 64});
  const Tensor spatial_logits = tg::randn({64, 64, 64});
  const Tensor weight = tg::rand({64}) + 0.5;
  require_bitwise_identical_across_threads([&] {
    Tensor x = logits.clone().requires_grad_();
    const Tensor loss = tg::nn::cross_entropy(x, target, {.weight = weight, .ignore_index = 5, .label_smoothing = 0.1});
    loss.backward();
    Tensor s = spatial_logits.clone().requires_grad_();
    const Tensor prob_loss = tg::nn::cross_entropy(s, probabilities, {.reduction = Reduction::Sum});
    prob_loss.backward();
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"loss", bytes(loss)}, {"dlogits", bytes(x.grad())}, {"prob_loss", bytes(prob_loss)}, {"dspatial", bytes(s.grad())}};
  });
}
