// Dropout: PyTorch's masks and values for the same seed (tests/fixtures/make_elementwise_fixtures.py),
// the backward through the saved mask, train()/eval(), p = 0 and p = 1, generators, errors.
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("dropout draws PyTorch's mask and values for the same seed", "[dropout][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "dropout_s0_4x5_p50", "dropout_s1_3x7_p20",
                                    "dropout_s42_2x3x4_p90", "dropout_s7_100_p10", "dropout_s123_1_p50",
                                    "dropout_s2024_33x17_p35");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO("case " << base << suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("elementwise.txt", base + suffix);
  Tensor x = leaf(c.at("x"));
  tg::manual_seed(static_cast<uint64_t>(c.scalar("seed")));
  tg::nn::Dropout dropout(c.scalar("p"));
  const Tensor y = dropout(x);
  REQUIRE(std::string(y.grad_fn_name()) == "DropoutBackward");
  // Bitwise: the same draws, and the same product x · (1 / (1 − p) rounded to the dtype).
  TG_REQUIRE_CLOSE(y, c.at("y"), 0.0);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), 0.0);
}

TEST_CASE("dropout with an explicit generator equals the default one seeded alike", "[dropout]") {
  const Tensor x = tg::ones({8, 64}, tg::kFloat64);
  tg::Generator generator(5);
  const Tensor with_generator = F::dropout(x, 0.2, true, &generator);
  tg::manual_seed(5);
  const Tensor with_default = F::dropout(x, 0.2);
  TG_REQUIRE_CLOSE(with_generator, with_default, 0.0);
  // The elements are 0 or exactly 1 / 0.8, and about a fifth of them are 0.
  int64_t zeros = 0;
  for (double v : with_generator.to_vector<double>()) {
    REQUIRE((v == 0.0 || v == 1.0 / 0.8));
    zeros += v == 0.0;
  }
  CHECK(zeros > 512 * 0.1);
  CHECK(zeros < 512 * 0.3);
  // The mask of random.txt's dropout case (torch.manual_seed(5), p = 0.2 on ones(8, 64), float32).
  const auto& reference = tg::testing::fixture("random.txt", "dropout_mask");
  tg::manual_seed(5);
  TG_REQUIRE_CLOSE(F::dropout(tg::ones({8, 64}), 0.2), reference.at("values"), 0.0);
}

TEST_CASE("Dropout follows train() and eval(); p = 0 and p = 1 as PyTorch", "[dropout][module]") {
  Tensor x = tg::randn({3, 4}, tg::kFloat64).requires_grad_();
  tg::nn::Dropout dropout(0.5);
  REQUIRE(dropout.parameters().empty());
  dropout.eval();
  CHECK(dropout(x).is_same(x));  // evaluation: the input itself, no draws
  dropout.train();
  CHECK(!dropout(x).is_same(x));
  CHECK(F::dropout(x, 0.0).is_same(x));
  CHECK(F::dropout(x, 0.5, /*training=*/false).is_same(x));
  // p = 1: x times 0 (NaN stays NaN, as torch's x * zeros), gradient 0, and no random draws.
  tg::manual_seed(9);
  const Tensor nan_input = tg::tensor({1.0, NAN, -2.0}, {}, tg::kFloat64);
  tg::testing::require_ieee_equal(F::dropout(nan_input, 1.0), {0.0, NAN, 0.0}, 0.0);
  const Tensor after = tg::rand({1});
  tg::manual_seed(9);
  CHECK(after.item() == tg::rand({1}).item());
  F::dropout(x, 1.0).sum().backward();
  tg::testing::require_ieee_equal(x.grad(), std::vector<double>(12, 0.0), 0.0);
  // Inside a Sequential, eval() reaches it.
  tg::nn::Sequential model(tg::nn::Identity(), tg::nn::Dropout(0.9));
  model.eval();
  CHECK(model(x).is_same(x));
}

TEST_CASE("dropout's gradient is the saved mask times 1 / (1 - p)", "[dropout][gradcheck]") {
  Tensor x = randn_leaf({5, 6}, tg::kFloat64);
  tg::Generator generator(11);
  // The same generator state for every evaluation, so that the finite differences see one mask.
  TG_REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        tg::Generator fixed(11);
        return F::dropout(in[0], 0.3, true, &fixed);
      },
      std::vector<Tensor>{x});
  const Tensor y = F::dropout(x, 0.3, true, &generator);
  y.backward(tg::ones({5, 6}, tg::kFloat64));
  // Where y kept x, the gradient is 1/0.7; where it dropped x, 0.
  const std::vector<double> yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) CHECK(gv[i] == (yv[i] == 0.0 ? 0.0 : 1.0 / 0.7));
}

TEST_CASE("dropout refuses bad arguments", "[dropout][errors]") {
  REQUIRE_TG_ERROR(tg::nn::Dropout(1.5), Catch::Contains("Dropout") && Catch::Contains("1.5"));
  REQUIRE_TG_ERROR(tg::nn::Dropout(-0.1), Catch::Contains("Dropout") && Catch::Contains("-0.1"));
  REQUIRE_TG_ERROR(F::dropout(tg::ones({2}), NAN), Catch::Contains("dropout") && Catch::Contains("between 0 and 1"));
  REQUIRE_TG_ERROR(F::dropout(tg::ones({2}, tg::kInt64), 0.5), Catch::Contains("dropout") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(F::dropout(Tensor(), 0.5), Catch::Contains("dropout") && Catch::Contains("undefined"));
  // Empty tensors pass through.
  CHECK(F::dropout(tg::ones({0, 3}), 0.5).shape() == Shape{0, 3});
}

TEST_CASE("dropout's bulk draws equal bernoulli_'s one-at-a-time draws across blocks and twists", "[dropout]") {
  // 5000 elements: 10000 words, several of the 2048-element draw blocks and of the twister's
  // 624-word regenerations; then the generator must stand where bernoulli_ leaves it.
  const double p = GENERATE(0.1, 0.5, 0.9);
  const int64_t n = 5000;
  tg::manual_seed(99);
  const Tensor keep = tg::empty({n}, tg::kFloat64).bernoulli_(1.0 - p);
  const Tensor next_after_bernoulli = tg::rand({4}, tg::kFloat64);
  tg::manual_seed(99);
  const Tensor y = F::dropout(tg::ones({n}, tg::kFloat64), p);
  const Tensor next_after_dropout = tg::rand({4}, tg::kFloat64);
  const std::vector<double> kept = keep.to_vector<double>(), values = y.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) REQUIRE((values[i] != 0.0) == (kept[i] == 1.0));
  TG_REQUIRE_CLOSE(next_after_dropout, next_after_bernoulli, 0.0);
}
