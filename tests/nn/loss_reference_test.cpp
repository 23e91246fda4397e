// Every loss against PyTorch: the cases of tests/fixtures/loss_reference.txt (written by
// make_loss_fixtures.py), each configuration under the reductions none, mean and sum — values and
// gradients in float64 within 1e-12 relative, and float32 against the same numbers.
#include <string>

#include "nn_test_util.hpp"

using tg::Shape;
using tg::Tensor;
using tg::nn::Reduction;
using namespace tg::nn_test;

namespace {

const char* const kFile = "loss_reference.txt";

Tensor optional_tensor(const tg::testing::FixtureCase& c, const std::string& name, tg::DType dtype) {
  return c.has(name) ? c.at(name).to(dtype) : Tensor();
}

// The int64 targets with their shape ([] for an unbatched input).
Tensor class_target(const tg::testing::FixtureCase& c) {
  const std::vector<int64_t>& values = c.ints("target");
  const std::vector<int64_t>& shape = c.ints("target_shape");
  Tensor target = tg::empty(Shape(shape.begin(), shape.end()), tg::kInt64);
  std::copy(values.begin(), values.end(), target.mutable_data<int64_t>());
  return target;
}

Reduction reduction_of(const tg::testing::FixtureCase& c) {
  const int code = static_cast<int>(c.scalar("reduction"));
  return code == 0 ? Reduction::None : code == 1 ? Reduction::Mean : Reduction::Sum;
}

// The loss the case names (its prefix up to the first '.'), called as the fixture describes.
Tensor run_loss(const tg::testing::FixtureCase& c, const Tensor& input, const Tensor& target, tg::DType dtype) {
  const std::string kind = c.name.substr(0, c.name.find('.'));
  const Reduction reduction = reduction_of(c);
  const Tensor weight = optional_tensor(c, "weight", dtype);
  if (kind == "cross_entropy")
    return tg::nn::cross_entropy(input, target,
                                 {.weight = weight,
                                  .ignore_index = c.has("ignore_index") ? static_cast<int64_t>(c.scalar("ignore_index")) : -100,
                                  .reduction = reduction,
                                  .label_smoothing = c.scalar("label_smoothing")});
  if (kind == "nll_loss")
    return tg::nn::nll_loss(input, target,
                            {.weight = weight,
                             .ignore_index = static_cast<int64_t>(c.scalar("ignore_index")),
                             .reduction = reduction});
  if (kind == "mse_loss") return tg::nn::mse_loss(input, target, reduction);
  if (kind == "l1_loss") return tg::nn::l1_loss(input, target, reduction);
  if (kind == "smooth_l1_loss") return tg::nn::smooth_l1_loss(input, target, reduction, c.scalar("beta"));
  if (kind == "huber_loss") return tg::nn::huber_loss(input, target, reduction, c.scalar("delta"));
  if (kind == "binary_cross_entropy") return tg::nn::binary_cross_entropy(input, target, weight, reduction);
  if (kind == "binary_cross_entropy_with_logits")
    return tg::nn::binary_cross_entropy_with_logits(input, target, weight, optional_tensor(c, "pos_weight", dtype),
                                                    reduction);
  FAIL("unknown loss in fixture case " << c.name);
  return {};
}

// Runs the case in `dtype` and compares loss, dinput and dtarget with torch's float64 numbers.
void check_case(const tg::testing::FixtureCase& c, tg::DType dtype, double tolerance) {
  CAPTURE(c.name, tg::name(dtype));
  Tensor input = leaf(c.at("input").to(dtype));
  Tensor target = c.has("target_shape") ? class_target(c)
                  : c.has("dtarget")    ? leaf(c.at("target").to(dtype))
                                        : c.at("target").to(dtype);
  const Tensor loss = run_loss(c, input, target, dtype);
  REQUIRE(loss.dtype() == dtype);
  REQUIRE(loss.shape() == c.at("loss").shape());
  tg::testing::require_ieee_equal(loss, tg::testing::values(c.at("loss")), tolerance);
  loss.backward(c.at("dloss").to(dtype));
  REQUIRE(input.grad().shape() == input.shape());
  tg::testing::require_ieee_equal(input.grad(), tg::testing::values(c.at("dinput")), tolerance);
  if (c.has("dtarget")) tg::testing::require_ieee_equal(target.grad(), tg::testing::values(c.at("dtarget")), tolerance);
}

}  // namespace

TEST_CASE("every loss matches PyTorch in float64: values and gradients", "[loss][fixture][reference]") {
  const auto& cases = tg::testing::load_fixtures(kFile);
  REQUIRE(cases.size() >= 141);
  for (const auto& [name, c] : cases) check_case(c, tg::kFloat64, 1e-12);
}

TEST_CASE("every loss matches PyTorch in float32", "[loss][fixture][reference]") {
  for (const auto& [name, c] : tg::testing::load_fixtures(kFile)) {
    // Logits of ~1e3 rounded to float32 move the loss by ~1e-4 already.
    if (name.find("large") != std::string::npos) continue;
    check_case(c, tg::kFloat32, 1e-5);
  }
}
