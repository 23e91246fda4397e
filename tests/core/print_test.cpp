// operator<< against the exact strings PyTorch prints (checked with torch 1.13's print). Our dtype
// suffix reads "dtype=float64" where PyTorch writes "dtype=torch.float64", and our grad_fn names
// carry no trailing version digit ("MulBackward" for PyTorch's "MulBackward0").
#include <cmath>
#include <limits>
#include <sstream>

#include "core_test_util.hpp"

using tg::Tensor;

namespace {
std::string str(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}
}  // namespace

TEST_CASE("print: 3-d seed tensor", "[core][print]") {
  CHECK(str(tg::tensor({0.2, 0.1, 0.3, 0.5, 0.1, 0.1}, {2, 1, 3})) ==
        "tensor([[[0.2000, 0.1000, 0.3000]],\n\n        [[0.5000, 0.1000, 0.1000]]])");
}

TEST_CASE("print: float64 with negative values aligned", "[core][print]") {
  CHECK(str(tg::tensor({1.5, -2.25, 10.125, 0.5}, {2, 2}, tg::kFloat64)) ==
        "tensor([[ 1.5000, -2.2500],\n        [10.1250,  0.5000]], dtype=float64)");
}

TEST_CASE("print: integral values, 0-d, and empty tensors", "[core][print]") {
  CHECK(str(tg::tensor({1, 2, 3})) == "tensor([1., 2., 3.])");
  CHECK(str(tg::scalar_tensor(0.5)) == "tensor(0.5000)");
  CHECK(str(tg::tensor({}, {0})) == "tensor([])");
  CHECK(str(tg::zeros({0, 3})) == "tensor([], size=(0, 3))");
  CHECK(str(tg::zeros({0}, tg::kFloat64)) == "tensor([], dtype=float64)");
  CHECK(str(Tensor()) == "[ undefined tensor ]");
}

TEST_CASE("print: requires_grad and grad_fn suffixes", "[core][print]") {
  Tensor x = tg::tensor({1, -2});
  x.requires_grad_();
  CHECK(str(x) == "tensor([ 1., -2.], requires_grad=True)");
  CHECK(str(x * 2.0) == "tensor([ 2., -4.], grad_fn=<MulBackward>)");
  CHECK(str((x * 2.0).sum()) == "tensor(-2., grad_fn=<SumBackward>)");
  CHECK(str(x.mean()) == "tensor(-0.5000, grad_fn=<MeanBackward>)");
  CHECK(str(x.exp()) == "tensor([2.7183, 0.1353], grad_fn=<ExpBackward>)");
  CHECK(str(x.to(tg::kFloat64)) == "tensor([ 1., -2.], dtype=float64, grad_fn=<ToCopyBackward>)");
  tg::NoGradGuard no_grad;
  CHECK(str(x * 2.0) == "tensor([ 2., -4.])");
}

TEST_CASE("print: suffixes wrap onto a new line past 80 columns", "[core][print]") {
  Tensor x = tg::tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4});
  x.requires_grad_();
  CHECK(str(x) == "tensor([1., 2., 3., 4., 5., 6., 7., 8., 9., 1., 2., 3., 4.],\n       requires_grad=True)");
}

TEST_CASE("print: long rows wrap at 80 columns", "[core][print]") {
  CHECK(str(tg::full({20}, 0.1234567)) ==
        "tensor([0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235,\n"
        "        0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235, 0.1235,\n"
        "        0.1235, 0.1235])");
}

TEST_CASE("print: scientific notation when magnitudes span more than 1000x", "[core][print]") {
  CHECK(str(tg::tensor({1e-5, 1.0})) == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(str(tg::tensor({1.0, 1e5})) == "tensor([1.0000e+00, 1.0000e+05])");
}

TEST_CASE("print: non-finite values and negative zero take no width", "[core][print]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(str(tg::tensor({1.0, nan})) == "tensor([1., nan])");
  CHECK(str(tg::tensor({0.0, nan})) == "tensor([0., nan])");
  CHECK(str(tg::tensor({-0.0, 1.5})) == "tensor([-0.0000, 1.5000])");
}

TEST_CASE("print: more than 1000 elements are summarised", "[core][print]") {
  std::vector<double> values(2000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  SECTION("1-d") {
    const Tensor t = tg::tensor(values) / 1000.0;
    CHECK(str(t) ==
          "tensor([0.0000e+00, 1.0000e-03, 2.0000e-03,  ..., 1.9970e+00, 1.9980e+00,\n        1.9990e+00])");
  }
  SECTION("2-d") {
    const Tensor t = tg::tensor(values, {40, 50});
    CHECK(str(t) ==
          "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
          "         4.9000e+01],\n"
          "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
          "         9.9000e+01],\n"
          "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
          "         1.4900e+02],\n"
          "        ...,\n"
          "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
          "         1.8990e+03],\n"
          "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
          "         1.9490e+03],\n"
          "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
          "         1.9990e+03]])");
  }
}

TEST_CASE("print: 3-d blocks, infinities and all zeros", "[core][print]") {
  CHECK(str(tg::tensor({1.5, -2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})) ==
        "tensor([[[ 1.5000, -2.0000],\n         [ 3.0000,  4.0000]],\n\n"
        "        [[ 5.0000,  6.0000],\n         [ 7.0000,  8.0000]]])");
  CHECK(str(tg::tensor({INFINITY, -1.5})) == "tensor([    inf, -1.5000])");
  CHECK(str(tg::zeros({2})) == "tensor([0., 0.])");
  CHECK(str(tg::tensor({1e10, 1.0})) == "tensor([1.0000e+10, 1.0000e+00])");
  CHECK(str(tg::tensor({123456.5, 1.0})) == "tensor([1.2346e+05, 1.0000e+00])");
}

TEST_CASE("printing a tensor with 100,000 dims of size 1 does not recurse once per dim", "[core][print]") {
  const tg::Shape shape(100000, 1);
  std::ostringstream out;
  out << tg::full(shape, 2.5);
  const std::string text = out.str();
  // tensor( + 100,000 '[' + 2.5000 + 100,000 ']' + )
  CHECK(text == "tensor(" + std::string(100000, '[') + "2.5000" + std::string(100000, ']') + ")");
}
