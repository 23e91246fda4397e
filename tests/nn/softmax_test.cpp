// Softmax and LogSoftmax modules: the functional forms and the modules give core's ops' values
// (checked against PyTorch in tests/core/softmax_test.cpp), over the module's dim.
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("Softmax and LogSoftmax modules match PyTorch", "[softmax][module][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  for (const std::string op : {"softmax", "log_softmax"}) {
    const auto& c = tg::testing::fixture("indexing.txt", op + "_2x3x4_dim1" + suffix);
    INFO(c.name);
    Tensor x = leaf(c.at("x"));
    tg::nn::Softmax softmax(1);
    tg::nn::LogSoftmax log_softmax(1);
    const Tensor y = op == "softmax" ? softmax(x) : log_softmax(x);
    TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
    y.backward(c.at("dy"));
    TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), fixture_atol(suffix));
    CHECK(softmax.parameters().empty());
  }
}

TEST_CASE("Softmax modules keep their dim and agree with F:: and the methods", "[softmax][module]") {
  const Tensor x = tg::randn({3, 5}, tg::kFloat64);
  tg::nn::Softmax by_column(0);
  tg::nn::LogSoftmax by_row(-1);
  CHECK(by_column.dim == 0);
  CHECK(by_column(x).to_vector<double>() == F::softmax(x, 0).to_vector<double>());
  CHECK(by_row(x).to_vector<double>() == x.log_softmax(-1).to_vector<double>());
  // exp(log_softmax) is softmax.
  TG_REQUIRE_CLOSE(by_row(x).exp(), x.softmax(1), 1e-15);
  tg::nn::Sequential model(tg::nn::Linear(5, 4), tg::nn::LogSoftmax(1));
  CHECK(model(x.to(tg::kFloat32)).shape() == tg::Shape{3, 4});
  REQUIRE_TG_ERROR(tg::nn::Softmax(2)(x), Catch::Contains("softmax") && Catch::Contains("dim 2"));
}
