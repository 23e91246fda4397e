#include <catch2/catch.hpp>

#include <cmath>

#include "support/fixtures.hpp"

using Catch::Contains;

TEST_CASE("anomaly detection is off by default and non-finite gradients pass silently", "[core][anomaly]") {
  REQUIRE_FALSE(tg::is_anomaly_enabled());
  tg::Tensor x = tg::tensor({1.0, 0.0}).requires_grad_();
  x.sqrt().sum().backward();
  REQUIRE(std::isinf(x.grad().to_vector<float>()[1]));
}

TEST_CASE("anomaly detection names the op and the tag where a NaN or Inf gradient appears", "[core][anomaly]") {
  tg::DetectAnomalyGuard detect;
  REQUIRE(tg::is_anomaly_enabled());

  SECTION("an Inf from sqrt at 0, inside nested tags") {
    tg::Tensor x = tg::tensor({1.0, 0.0, 4.0}, {3}, tg::kFloat64).requires_grad_();
    tg::Tensor y;
    {
      tg::AnomalyTag outer("encoder");
      tg::AnomalyTag inner("block 2");
      y = (x * 2.0).sqrt();
    }
    tg::Tensor loss = (y * 3.0).sum();  // recorded after the tags ended
    REQUIRE_THROWS_WITH(loss.backward(), Contains("anomaly") && Contains("SqrtBackward") && Contains("an Inf") &&
                                             Contains("[3]") && Contains("'encoder/block 2'"));
  }
  SECTION("a NaN from an op recorded outside any tag") {
    tg::Tensor x = tg::tensor({-1.0, 2.0}).requires_grad_();
    tg::Tensor finite = x.log().sum();  // log(-1) is NaN in the forward, but d log(x)/dx = 1/x is not
    REQUIRE_NOTHROW(finite.backward());
    tg::Tensor z = tg::tensor({-4.0, 4.0}).requires_grad_();
    tg::Tensor loss = z.sqrt().sum();  // sqrt(-4) = NaN, so its gradient 1 / (2 sqrt(-4)) is NaN too
    REQUIRE_THROWS_WITH(loss.backward(), Contains("SqrtBackward") && Contains("a NaN") &&
                                             Contains("outside any tg::AnomalyTag"));
  }
  SECTION("the first bad gradient names the input it belongs to") {
    tg::Tensor a = tg::tensor({1.0, 2.0}).requires_grad_();
    tg::Tensor b = tg::tensor({0.0, 1.0}).requires_grad_();
    tg::Tensor loss = (a / b).sum();  // d(a/b)/da = 1/b is Inf at b = 0
    REQUIRE_THROWS_WITH(loss.backward(), Contains("DivBackward") && Contains("an Inf") && Contains("input 0"));
  }
  SECTION("finite gradients go through unchanged") {
    tg::Tensor x = tg::tensor({1.0, 2.0}).requires_grad_();
    (x * x).sum().backward();
    REQUIRE(x.grad().to_vector<float>() == std::vector<float>{2.0f, 4.0f});
  }
}

TEST_CASE("anomaly guards nest and restore the previous mode", "[core][anomaly]") {
  {
    tg::DetectAnomalyGuard on;
    REQUIRE(tg::is_anomaly_enabled());
    {
      tg::DetectAnomalyGuard off(false);
      REQUIRE_FALSE(tg::is_anomaly_enabled());
    }
    REQUIRE(tg::is_anomaly_enabled());
  }
  REQUIRE_FALSE(tg::is_anomaly_enabled());
}
