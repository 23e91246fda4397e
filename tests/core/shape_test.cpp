// reshape (a view, one -1 allowed) and transpose (a permuting copy): fixtures, hand values,
// gradcheck.
#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

TEST_CASE("reshape with -1 matches PyTorch", "[core][shape][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("core_ops.txt", "reshape_2x3x4_to_4xm1" + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = x.reshape(c.ints("shape"));
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("transpose matches PyTorch", "[core][shape][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("core_ops.txt", "transpose_2x3x4_0_2" + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = x.transpose(static_cast<int64_t>(c.scalar("dim0")), static_cast<int64_t>(c.scalar("dim1")));
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("reshape by hand", "[core][shape]") {
  const Tensor x = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(x.reshape({3, -1}).shape() == tg::Shape{3, 2});
  CHECK(x.reshape({-1}).shape() == tg::Shape{6});
  CHECK(x.reshape({1, -1, 1, 2}).shape() == tg::Shape{1, 3, 1, 2});
  CHECK(x.reshape({6}).to_vector<float>() == x.to_vector<float>());
  CHECK(tg::scalar_tensor(3.0).reshape({1, 1}).shape() == tg::Shape{1, 1});
  CHECK(tg::ones({1, 1}).reshape({}).dim() == 0);
  CHECK(tg::zeros({0, 3}).reshape({3, -1}).shape() == tg::Shape{3, 0});
  // With a 0 among the known sizes, -1 could be anything: PyTorch refuses, and so do we.
  REQUIRE_THROWS_AS(tg::zeros({0, 3}).reshape({3, 0, -1}), tg::Error);
}

TEST_CASE("reshape shares storage with its input", "[core][shape]") {
  Tensor x = tg::zeros({2, 3});
  Tensor y = x.reshape({3, 2});
  y.mutable_data<float>()[5] = 7.0f;
  CHECK(x.to_vector<float>()[5] == 7.0f);
  CHECK(x.data<float>() == y.data<float>());
}

TEST_CASE("transpose by hand", "[core][shape]") {
  const Tensor x = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = x.transpose(0, 1);
  CHECK(t.shape() == tg::Shape{3, 2});
  CHECK(t.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(x.transpose(-1, -2).to_vector<float>() == t.to_vector<float>());
  CHECK(x.transpose(1, 1).to_vector<float>() == x.to_vector<float>());
  // [2, 1, 3] swapping dims 0 and 2 -> [3, 1, 2]
  const Tensor y = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 1, 3}).transpose(0, 2);
  CHECK(y.shape() == tg::Shape{3, 1, 2});
  CHECK(y.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  // A 4-d transpose of the middle dims: [1, 2, 2, 2] -> element (0, j, i, k) = x(0, i, j, k)
  const Tensor z = tg::tensor({0, 1, 2, 3, 4, 5, 6, 7}, {1, 2, 2, 2}).transpose(1, 2);
  CHECK(z.to_vector<float>() == std::vector<float>{0, 1, 4, 5, 2, 3, 6, 7});
  // transpose returns new storage
  CHECK(t.data<float>() != x.data<float>());
}

TEST_CASE("gradcheck: reshape and transpose", "[core][shape][gradcheck]") {
  using Case = std::pair<tg::Shape, tg::Shape>;
  const Case c = GENERATE(Case{{2, 3, 4}, {4, -1}}, Case{{6}, {2, 1, 3}}, Case{{2, 3}, {-1}}, Case{{}, {1, 1}});
  tg::manual_seed(41);
  const Tensor x = random_leaf(c.first);
  const Tensor w = random_leaf({c.second.back() == -1 ? 1 : c.second.back()});
  INFO(tg::to_string(c.first) << " -> " << tg::to_string(c.second));
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].reshape(c.second) * in[1]; },
                       (std::vector<Tensor>{x, w}));

  using Dims = std::pair<int64_t, int64_t>;
  const Dims dims = GENERATE(Dims{0, 2}, Dims{-1, 1}, Dims{1, 1}, Dims{0, -3});
  INFO("transpose " << dims.first << ", " << dims.second);
  const Tensor y = random_leaf({2, 3, 4});
  const Tensor v = random_leaf({2});  // broadcast against the new last dim of size 2, 3 or 4
  TG_REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        const Tensor t = in[0].transpose(dims.first, dims.second);
        return t * in[1].sum() + t.pow(2);
      },
      (std::vector<Tensor>{y, v}));
}
