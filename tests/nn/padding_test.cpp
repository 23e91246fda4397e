// F::pad and the padding modules: PyTorch fixtures for every mode (negative pads, 1 to 4 padded
// dims, unbatched inputs), hand-derived values, gradcheck and gradgradcheck, errors naming the
// shapes, and thread-count determinism of the forward and the (overlapping) backward.
#include <string>
#include <vector>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;
using Catch::Matchers::Contains;

namespace {

std::string ends_with_mode(const std::string& name) {
  for (const char* mode : {"constant", "reflect", "replicate", "circular"})
    if (name.find(std::string("_") + mode + "_f") != std::string::npos) return mode;
  FAIL("no mode in case name " << name);
  return "";
}

Tensor row(const std::vector<double>& values) {
  return tg::tensor(values, {1, 1, static_cast<int64_t>(values.size())}, tg::kFloat64);
}

}  // namespace

TEST_CASE("pad matches PyTorch in every mode", "[padding][fixture]") {
  int cases = 0;
  for (const auto& [name, c] : tg::testing::load_fixtures("pooling.txt")) {
    if (name.rfind("pad_", 0) != 0) continue;
    CAPTURE(name);
    ++cases;
    const std::string suffix = name.substr(name.size() - 4);
    const std::string mode = ends_with_mode(name);
    Tensor x = leaf(c.at("x"));
    Tensor y = F::pad(x, c.ints("pad"), {.mode = mode, .value = c.scalar("value")});
    TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
    y.backward(c.at("dy"));
    TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));
  }
  REQUIRE(cases == 40);
}

TEST_CASE("pad: hand-derived values of each mode, negative pads included", "[padding]") {
  const Tensor x = row({0, 1, 2, 3, 4});
  auto values = [&](std::vector<int64_t> pad, std::string mode, double value = 0) {
    return tg::testing::values(F::pad(x, pad, {.mode = mode, .value = value}));
  };
  CHECK(values({2, 1}, "constant", 9) == std::vector<double>{9, 9, 0, 1, 2, 3, 4, 9});
  CHECK(values({-2, 1}, "constant") == std::vector<double>{2, 3, 4, 0});
  CHECK(values({2, 2}, "reflect") == std::vector<double>{2, 1, 0, 1, 2, 3, 4, 3, 2});
  CHECK(values({2, -1}, "reflect") == std::vector<double>{2, 1, 0, 1, 2, 3});
  CHECK(values({-1, 2}, "reflect") == std::vector<double>{1, 2, 3, 4, 3, 2});
  CHECK(values({2, 3}, "replicate") == std::vector<double>{0, 0, 0, 1, 2, 3, 4, 4, 4, 4});
  CHECK(values({-2, 3}, "replicate") == std::vector<double>{2, 3, 4, 4, 4, 4});
  CHECK(values({2, 5}, "circular") == std::vector<double>{3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
  // torch crops first, then wraps around what is left: (2, −1) wraps [0, 1, 2, 3].
  CHECK(values({2, -1}, "circular") == std::vector<double>{2, 3, 0, 1, 2, 3});
  CHECK(values({-1, 2}, "circular") == std::vector<double>{1, 2, 3, 4, 1, 2});

  // The backward adds every output's gradient into the element it read: replicate (2, 3) reads
  // x₀ three times and x₄ four times.
  Tensor leaf_x = x.clone().requires_grad_();
  F::pad(leaf_x, {2, 3}, {.mode = "replicate"}).sum().backward();
  CHECK(tg::testing::values(leaf_x.grad()) == std::vector<double>{3, 1, 1, 1, 4});
  Tensor reflected = x.clone().requires_grad_();
  F::pad(reflected, {2, 2}, {.mode = "reflect"}).sum().backward();
  CHECK(tg::testing::values(reflected.grad()) == std::vector<double>{1, 2, 3, 2, 1});
}

TEST_CASE("pad passes gradcheck and gradgradcheck in float64", "[padding][gradcheck]") {
  tg::manual_seed(5);
  struct Case {
    Shape shape;
    std::vector<int64_t> pad;
    std::string mode;
  };
  const Case c = GENERATE(Case{{2, 3, 4}, {1, 2, -1, 1}, "constant"}, Case{{1, 2, 3, 4}, {2, 1, 1, 2}, "reflect"},
                          Case{{2, 3, 4}, {3, 1, 0, 2}, "replicate"}, Case{{1, 2, 3, 4}, {2, -1, 3, 1}, "circular"},
                          Case{{1, 1, 2, 3, 3}, {1, 1, 1, 0, 1, 1}, "reflect"});
  CAPTURE(c.shape, c.pad, c.mode);
  auto fn = [&](const std::vector<Tensor>& in) { return F::pad(in[0], c.pad, {.mode = c.mode}); };
  std::vector<Tensor> inputs{randn_leaf(c.shape, tg::kFloat64)};
  TG_REQUIRE_GRADCHECK(fn, inputs);
  const tg::GradcheckResult second = tg::gradgradcheck(fn, inputs);
  INFO(second.message);
  REQUIRE(second.passed);
}

TEST_CASE("pad: the node names and an integer input", "[padding]") {
  const Tensor x = tg::randn({1, 2, 3, 4}).requires_grad_();
  CHECK(std::string(F::pad(x, {1, 1}).grad_fn_name()) == "ConstantPadNdBackward");
  CHECK(std::string(F::pad(x, {1, 1, 1, 1}, {.mode = "reflect"}).grad_fn_name()) == "ReflectionPadBackward");
  CHECK(std::string(F::pad(x, {1, 1, 1, 1}, {.mode = "replicate"}).grad_fn_name()) == "ReplicationPadBackward");
  CHECK(std::string(F::pad(x, {1, 1, 1, 1}, {.mode = "circular"}).grad_fn_name()) == "CircularPadBackward");
  const Tensor ints = tg::tensor(std::vector<int64_t>{1, 2, 3}, {1, 3});
  CHECK(F::pad(ints, {1, 0}, {.value = 7}).to_vector<int64_t>() == std::vector<int64_t>{7, 1, 2, 3});
  CHECK(F::pad(x, {}).shape() == x.shape());
  CHECK(F::pad(x, {-2, -2}).shape() == Shape{1, 2, 3, 0});
}

TEST_CASE("pad: errors name the pads and the shape", "[padding]") {
  const Tensor x = tg::randn({2, 3, 4, 5});
  REQUIRE_TG_ERROR(F::pad(x, {1}), Contains("even number") && Contains("[2, 3, 4, 5]"));
  REQUIRE_TG_ERROR(F::pad(x, std::vector<int64_t>(10, 1)), Contains("10 pad sizes"));
  REQUIRE_TG_ERROR(F::pad(x, {-3, -3}), Contains("negative") && Contains("[2, 3, 4, 5]"));
  REQUIRE_TG_ERROR(F::pad(x, {1, 1}, {.mode = "reflect", .value = 1}), Contains("takes no value"));
  REQUIRE_TG_ERROR(F::pad(x, {1, 1}, {.mode = "reflect"}), Contains("last 1, 2 or 3 dims") && Contains("[2, 3, 4, 5]"));
  REQUIRE_TG_ERROR(F::pad(x, {5, 1, 0, 0}, {.mode = "reflect"}), Contains("smaller than the dim") && Contains("(5, 1)"));
  REQUIRE_TG_ERROR(F::pad(x, {6, 1, 0, 0}, {.mode = "circular"}), Contains("more than once"));
  REQUIRE_TG_ERROR(F::pad(tg::randn({2, 3, 0, 5}), {1, 1, 1, 1}, {.mode = "replicate"}), Contains("non-empty"));
  REQUIRE_TG_ERROR(F::pad(x, {1, 1}, {.mode = "wrap"}), Contains("unknown mode \"wrap\""));
  REQUIRE_TG_ERROR(F::pad(tg::Tensor(), {1, 1}), Contains("undefined"));
  REQUIRE_TG_ERROR(tg::nn::ZeroPad2d({1, 2, 3}), Contains("1 or 4"));
}

TEST_CASE("pad: forward and backward are bitwise identical at any thread count", "[padding][determinism]") {
  const std::string mode = GENERATE(as<std::string>{}, "constant", "reflect", "replicate", "circular");
  CAPTURE(mode);
  tg::manual_seed(9);
  const Tensor x0 = tg::randn({4, 16, 40, 40});
  const Tensor dy = tg::randn({4, 16, 40 + 5, 40 + 7});
  require_bitwise_identical_across_threads([&] {
    Tensor x = x0.clone().requires_grad_();
    Tensor y = F::pad(x, {3, 4, 2, 3}, {.mode = mode});
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{{"y", bytes(y)}, {"dx", bytes(x.grad())}};
  });
}

TEST_CASE("the padding modules are F::pad with their mode", "[padding][module]") {
  tg::manual_seed(3);
  const Tensor x = tg::randn({2, 3, 4, 5});
  TG_REQUIRE_CLOSE(tg::nn::ZeroPad2d(2)(x), F::pad(x, {2, 2, 2, 2}), 0.0);
  TG_REQUIRE_CLOSE(tg::nn::ConstantPad2d({1, 0, 2, 3}, 3.5)(x), F::pad(x, {1, 0, 2, 3}, {.value = 3.5}), 0.0);
  TG_REQUIRE_CLOSE(tg::nn::ReflectionPad2d({1, 2, 3, 0})(x), F::pad(x, {1, 2, 3, 0}, {.mode = "reflect"}), 0.0);
  TG_REQUIRE_CLOSE(tg::nn::ReplicationPad2d(3)(x.select(0, 0)), F::pad(x.select(0, 0), {3, 3, 3, 3}, {.mode = "replicate"}), 0.0);
  CHECK(tg::nn::ZeroPad2d(1).parameters().empty());
}
