// Every invalid call throws tg::Error whose message names the operation and the offending shapes,
// dims or dtypes.
#include "core_test_util.hpp"

using Catch::Contains;
using tg::Tensor;

TEST_CASE("error: incompatible broadcast", "[core][errors]") {
  const Tensor a = tg::ones({2, 3}), b = tg::ones({4});
  REQUIRE_THROWS_AS(a + b, tg::Error);
  REQUIRE_THROWS_WITH(a + b, Contains("add") && Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(a * tg::ones({3, 3}), Contains("mul") && Contains("[2, 3]") && Contains("[3, 3]"));
  REQUIRE_THROWS_WITH(tg::ones({2, 1, 5}) / tg::ones({3, 4}), Contains("div") && Contains("[2, 1, 5]"));
  REQUIRE_THROWS_WITH(b - a, Contains("sub") && Contains("[4]") && Contains("[2, 3]"));
}

TEST_CASE("error: out-of-range dims", "[core][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_THROWS_AS(x.sum({3}), tg::Error);
  REQUIRE_THROWS_WITH(x.sum({3}), Contains("sum") && Contains("dim 3") && Contains("2 dims"));
  REQUIRE_THROWS_WITH(x.mean({-3}), Contains("mean") && Contains("dim -3"));
  REQUIRE_THROWS_WITH(x.var(std::vector<int64_t>{2}), Contains("var") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(x.transpose(0, 2), Contains("transpose") && Contains("dim 2"));
  REQUIRE_THROWS_WITH(x.transpose(-3, 0), Contains("transpose") && Contains("dim -3"));
  REQUIRE_THROWS_WITH(x.size(5), Contains("size") && Contains("dim 5"));
}

TEST_CASE("error: duplicate dims", "[core][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_THROWS_AS(x.sum({1, -1}), tg::Error);
  REQUIRE_THROWS_WITH(x.sum({1, -1}), Contains("sum") && Contains("more than once") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.var({0, 0}), Contains("var") && Contains("dim 0"));
}

// + − · / and cat promote operands of different dtypes, as PyTorch (bfloat16_test.cpp); products
// refuse them, as PyTorch's matmul ("expected scalar type Float but found Double").
TEST_CASE("error: mismatched dtypes", "[core][errors]") {
  REQUIRE_THROWS_AS(tg::matmul(tg::ones({2, 2}), tg::ones({2, 2}, tg::kFloat64)), tg::Error);
  REQUIRE_THROWS_WITH(tg::matmul(tg::ones({2, 2}), tg::ones({2, 2}, tg::kFloat64)),
                      Contains("matmul") && Contains("float32") && Contains("float64"));
}

TEST_CASE("error: matmul inner sizes and ranks", "[core][errors]") {
  REQUIRE_THROWS_AS(tg::matmul(tg::ones({2, 3}), tg::ones({4, 5})), tg::Error);
  REQUIRE_THROWS_WITH(tg::matmul(tg::ones({2, 3}), tg::ones({4, 5})),
                      Contains("matmul") && Contains("[2, 3]") && Contains("[4, 5]"));
  // 1-D and batched operands follow torch.matmul's rules (batched_matmul_test.cpp); their inner
  // sizes must agree too, and a 0-d operand is refused.
  REQUIRE_THROWS_WITH(tg::matmul(tg::ones({3}), tg::ones({4, 2})), Contains("matmul") && Contains("[3]"));
  REQUIRE_THROWS_WITH(tg::matmul(tg::ones({2, 3}), tg::ones({2, 4, 4})),
                      Contains("matmul") && Contains("[2, 4, 4]"));
  REQUIRE_THROWS_WITH(tg::matmul(tg::ones({2, 3}), tg::scalar_tensor(1)), Contains("matmul") && Contains("[]"));
}

TEST_CASE("error: reshape to another element count or with two -1", "[core][errors]") {
  const Tensor x = tg::ones({2, 3});
  REQUIRE_THROWS_AS(x.reshape({4}), tg::Error);
  REQUIRE_THROWS_WITH(x.reshape({4}), Contains("reshape") && Contains("[4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.reshape({4, -1}), Contains("reshape") && Contains("[4, -1]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.reshape({-1, -1}), Contains("reshape") && Contains("one dim") && Contains("[-1, -1]"));
  REQUIRE_THROWS_WITH(x.reshape({-2, 3}), Contains("reshape") && Contains("-2"));
}

TEST_CASE("error: item on a multi-element tensor", "[core][errors]") {
  REQUIRE_THROWS_AS(tg::ones({2, 2}).item(), tg::Error);
  REQUIRE_THROWS_WITH(tg::ones({2, 2}).item(), Contains("item") && Contains("4 elements") && Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(tg::ones({0}).item(), Contains("item") && Contains("0 elements"));
}

TEST_CASE("error: backward on a non-scalar, with a wrong grad shape, or without grad", "[core][errors]") {
  Tensor x = tg::ones({2, 3}).requires_grad_();
  const Tensor y = x * 2.0;
  REQUIRE_THROWS_AS(y.backward(), tg::Error);
  REQUIRE_THROWS_WITH(y.backward(), Contains("backward") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(y.backward(tg::ones({3, 2})), Contains("backward") && Contains("[3, 2]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(y.backward(tg::ones({2, 3}, tg::kFloat64)), Contains("backward") && Contains("float64"));
  REQUIRE_THROWS_WITH(tg::ones({1}).backward(), Contains("backward") && Contains("does not require grad"));
  // The failed calls left the graph usable.
  y.backward(tg::ones({2, 3}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>(6, 2.0f));
}

TEST_CASE("error: data of the wrong type", "[core][errors]") {
  Tensor x = tg::ones({2});
  REQUIRE_THROWS_AS(x.data<double>(), tg::Error);
  REQUIRE_THROWS_WITH(x.data<double>(), Contains("data") && Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_WITH(x.to_vector<double>(), Contains("float64") && Contains("float32"));
  REQUIRE_THROWS_WITH(x.mutable_data<double>(), Contains("mutable_data") && Contains("float32"));
  REQUIRE_THROWS_WITH(tg::ones({2}, tg::kFloat64).data<float>(), Contains("data") && Contains("float64"));
}

TEST_CASE("error: in-place changes to a leaf that requires grad", "[core][errors]") {
  Tensor w = tg::ones({2, 2}).requires_grad_();
  REQUIRE_THROWS_AS(w.fill_(1.0), tg::Error);
  REQUIRE_THROWS_WITH(w.fill_(1.0), Contains("fill_") && Contains("requires grad") && Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(w.zero_(), Contains("fill_"));
  REQUIRE_THROWS_WITH(w.normal_(), Contains("normal_") && Contains("requires grad"));
  REQUIRE_THROWS_WITH(w.uniform_(0, 1), Contains("uniform_"));
  REQUIRE_THROWS_WITH(w.copy_(tg::zeros({2, 2})), Contains("copy_"));
  tg::NoGradGuard no_grad;
  w.fill_(3.0);
  CHECK(w.to_vector<float>() == std::vector<float>(4, 3.0f));
}

TEST_CASE("error: creation with a wrong value count, negative or overflowing shapes", "[core][errors]") {
  REQUIRE_THROWS_AS(tg::tensor({1, 2, 3}, {2, 2}), tg::Error);
  REQUIRE_THROWS_WITH(tg::tensor({1, 2, 3}, {2, 2}), Contains("tensor") && Contains("3 values") && Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(tg::zeros({2, -1}), Contains("zeros") && Contains("negative") && Contains("[2, -1]"));
  REQUIRE_THROWS_WITH(tg::empty({-3}), Contains("empty") && Contains("-3"));
  REQUIRE_THROWS_WITH(tg::randn({3, -2}), Contains("randn") && Contains("-2"));
  const int64_t huge = int64_t{1} << 40;
  REQUIRE_THROWS_AS(tg::zeros({huge, huge}), tg::Error);
  REQUIRE_THROWS_WITH(tg::zeros({huge, huge}), Contains("too many elements") && Contains("[1099511627776, 1099511627776]"));
  REQUIRE_THROWS_WITH(tg::empty({huge, huge, huge}, tg::kFloat64), Contains("too many elements"));
  REQUIRE_THROWS_WITH(tg::ones({2, 3}).reshape({huge, huge}), Contains("reshape"));
  // Addressable but larger than any memory: a tg::Error, not std::bad_alloc.
  REQUIRE_THROWS_WITH(tg::empty({huge}, tg::kFloat64), Contains("empty") && Contains("cannot allocate") &&
                                                           Contains("[1099511627776]"));
}

TEST_CASE("error: copy_ with another shape and set_grad with another shape", "[core][errors]") {
  Tensor x = tg::zeros({2, 2});
  REQUIRE_THROWS_WITH(x.copy_(tg::zeros({4})), Contains("copy_") && Contains("[2, 2]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(x.set_grad(tg::zeros({3})), Contains("set_grad") && Contains("[2, 2]") && Contains("[3]"));
  REQUIRE_THROWS_WITH(x.set_grad(tg::zeros({2, 2}, tg::kFloat64)), Contains("set_grad") && Contains("float64"));
}

TEST_CASE("error: set_num_threads below 1", "[core][errors]") {
  REQUIRE_THROWS_AS(tg::set_num_threads(0), tg::Error);
  REQUIRE_THROWS_WITH(tg::set_num_threads(0), Contains("set_num_threads") && Contains("0"));
  REQUIRE_THROWS_WITH(tg::set_num_threads(-4), Contains("set_num_threads") && Contains("-4"));
}

TEST_CASE("error: undefined tensors", "[core][errors]") {
  const Tensor undefined;
  REQUIRE_THROWS_AS(undefined.shape(), tg::Error);
  REQUIRE_THROWS_WITH(undefined + tg::ones({1}), Contains("add") && Contains("undefined"));
  REQUIRE_THROWS_WITH(undefined.sum(), Contains("sum") && Contains("undefined"));
  REQUIRE_THROWS_WITH(tg::matmul(undefined, tg::ones({1, 1})), Contains("matmul"));
}

TEST_CASE("tg::Error is a std::runtime_error", "[core][errors]") {
  REQUIRE_THROWS_AS(tg::ones({2}).item(), std::runtime_error);
}

TEST_CASE("broadcast_shapes refuses negative dims, as PyTorch does", "[core][errors]") {
  REQUIRE_THROWS_WITH(tg::broadcast_shapes({-5}, {1}),
                      Catch::Contains("broadcast_shapes") && Catch::Contains("negative dimension -5"));
  REQUIRE_THROWS_WITH(tg::broadcast_shapes({2, 3}, {-1, 3}), Catch::Contains("[-1, 3]"));
}

TEST_CASE("creation errors name the function the user called", "[core][errors]") {
  const tg::Shape bad{2, -3};
  REQUIRE_THROWS_WITH(tg::zeros(bad), Catch::StartsWith("zeros:"));
  REQUIRE_THROWS_WITH(tg::ones(bad), Catch::StartsWith("ones:"));
  REQUIRE_THROWS_WITH(tg::full(bad, 1.0), Catch::StartsWith("full:"));
  REQUIRE_THROWS_WITH(tg::zeros_like(tg::Tensor()), Catch::StartsWith("zeros_like:"));
  REQUIRE_THROWS_WITH(tg::ones_like(tg::Tensor()), Catch::StartsWith("ones_like:"));
  REQUIRE_THROWS_WITH(tg::full_like(tg::Tensor(), 1.0), Catch::StartsWith("full_like:"));
}
