// cat, stack, split, chunk: PyTorch fixtures (every piece's gradient), sizes by hand (torch's
// chunk rule, empty dims, the legacy [0] tensors of cat), gradcheck, errors.
#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {

// "y0", "dy3"...: the fixture's name of piece i (appended, not `"y" + to_string(i)`, on which GCC 12
// reports a false -Wrestrict).
std::string piece_name(const char* prefix, size_t i) {
  std::string name = prefix;
  name += std::to_string(i);
  return name;
}

std::vector<int64_t> sizes_along(const std::vector<Tensor>& pieces, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& piece : pieces) sizes.push_back(piece.size(dim));
  return sizes;
}

}  // namespace

TEST_CASE("cat and stack match PyTorch forward and backward", "[core][join][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "cat_dim1", "cat_dim0_3d", "stack_dim1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", name + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("a").dtype());
  std::vector<Tensor> inputs;
  for (const char* input : {"a", "b", "c"})
    if (c.has(input)) inputs.push_back(leaf(c.at(input)));
  const Tensor y = name == "stack_dim1" ? tg::stack(inputs, 1) : tg::cat(inputs, name == "cat_dim1" ? 1 : 0);
  CHECK(y.grad_fn_name() == std::string("CatBackward"));
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  for (size_t i = 0; i < inputs.size(); ++i) TG_REQUIRE_NEAR(inputs[i].grad(), c.at(std::string("d") + "abc"[i]), tol);
}

TEST_CASE("split and chunk match PyTorch forward and backward", "[core][join][fixture]") {
  const std::string name =
      GENERATE(as<std::string>{}, "split_size2_dim0", "split_sizes_dim1", "chunk3_dim1", "chunk4_dim0");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", name + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  std::vector<Tensor> pieces;
  if (name == "split_size2_dim0")
    pieces = x.split(2);
  else if (name == "split_sizes_dim1")
    pieces = x.split(c.ints("split_sizes"), 1);
  else if (name == "chunk3_dim1")
    pieces = x.chunk(3, 1);
  else
    pieces = tg::chunk(x, 4, 0);
  size_t expected_count = 0;
  while (c.has(piece_name("y", expected_count))) ++expected_count;
  REQUIRE(pieces.size() == expected_count);
  Tensor total = tg::zeros({}, x.dtype());
  for (size_t i = 0; i < pieces.size(); ++i) {
    TG_REQUIRE_NEAR(pieces[i], c.at(piece_name("y", i)), tol);
    total = total + (pieces[i] * c.at(piece_name("dy", i))).sum();
  }
  total.backward();
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("join and split sizes by hand", "[core][join]") {
  const Tensor x = tg::tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 5});
  // split by size: the last piece holds the remainder; a braced list means sizes.
  CHECK(sizes_along(x.split(2, 1), 1) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes_along(x.split(5, 1), 1) == std::vector<int64_t>{5});
  CHECK(sizes_along(x.split(7, 1), 1) == std::vector<int64_t>{5});
  CHECK(sizes_along(x.split({2}, 0), 0) == std::vector<int64_t>{2});
  REQUIRE_THROWS_AS(x.split({3}, 1), tg::Error);  // {3} is a list of sizes, and 3 != 5
  CHECK(sizes_along(x.split({1, 0, 4}, -1), 1) == std::vector<int64_t>{1, 0, 4});
  CHECK(x.split({1, 0, 4}, -1)[2].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 6, 7, 8, 9});
  // torch.chunk: ceil(size / chunks) per piece, so 6 rows in 4 chunks are 3 pieces of 2, and 5
  // columns in 3 chunks are 2, 2, 1.
  CHECK(sizes_along(tg::zeros({6, 1}).chunk(4), 0) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes_along(x.chunk(3, 1), 1) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes_along(x.chunk(10, 1), 1) == std::vector<int64_t>{1, 1, 1, 1, 1});
  // An empty dim: split gives one empty piece, chunk gives `chunks` of them.
  CHECK(tg::zeros({0, 3}).split(2).size() == 1);
  CHECK(tg::zeros({0, 3}).chunk(3).size() == 3);
  CHECK(tg::zeros({0, 3}).split(0).size() == 1);

  const Tensor a = tg::tensor({1, 2}, {1, 2}), b = tg::tensor({3, 4, 5, 6}, {2, 2});
  CHECK(tg::cat({a, b}).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(tg::cat({a, b}, -2).shape() == tg::Shape{3, 2});
  // PyTorch's legacy rule: a 1-D tensor of shape [0] is skipped, whatever the other shapes.
  CHECK(tg::cat({tg::zeros({0}), a, tg::zeros({0})}).shape() == tg::Shape{1, 2});
  CHECK(tg::cat({tg::zeros({0}), tg::zeros({0})}).shape() == tg::Shape{0});
  // int64 and bool tensors join too.
  CHECK(tg::cat({tg::tensor({1}, {}, tg::kInt64), tg::tensor({2, 3}, {}, tg::kInt64)}).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 2, 3});
  const Tensor stacked = tg::stack({tg::tensor({1, 2}), tg::tensor({3, 4})}, -1);
  CHECK(stacked.shape() == tg::Shape{2, 2});
  CHECK(stacked.to_vector<float>() == std::vector<float>{1, 3, 2, 4});
  CHECK(tg::stack({tg::scalar_tensor(1), tg::scalar_tensor(2)}).shape() == tg::Shape{2});

  // cat of many tensors: more than the node's inline edges, every one gets its gradient.
  std::vector<Tensor> many;
  for (int i = 0; i < 7; ++i) many.push_back(tg::full({1, 2}, i, tg::kFloat64).requires_grad_());
  many.push_back(tg::ones({1, 2}, tg::kFloat64));  // a constant among them gets nothing
  const Tensor joined = tg::cat(many);
  (joined * tg::tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {8, 2}, tg::kFloat64)).sum().backward();
  for (int i = 0; i < 7; ++i)
    CHECK(many[i].grad().to_vector<double>() == std::vector<double>{2.0 * i + 1, 2.0 * i + 2});
  CHECK_FALSE(many[7].grad().defined());
}

TEST_CASE("join and split pass gradcheck in float64", "[core][join][gradcheck]") {
  const Tensor a = random_leaf({2, 3, 2}), b = random_leaf({2, 1, 2}), c = random_leaf({2, 3, 2});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return tg::cat(in, 1); }, (std::vector<Tensor>{a, b, c}));
  TG_REQUIRE_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return tg::stack({in[0], in[1]}, 3);
      },
      (std::vector<Tensor>{a, c}));
  TG_REQUIRE_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        const std::vector<Tensor> pieces = in[0].split({1, 2}, 1);
        return pieces[0] * 2.0 + pieces[1].sum({1}, true);
      },
      (std::vector<Tensor>{a}));
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].chunk(2, -1)[1]; }, (std::vector<Tensor>{c}));
}

TEST_CASE("join and split refuse bad arguments with tg::Error", "[core][join][errors]") {
  using Catch::Matchers::Contains;
  const Tensor a = tg::zeros({2, 3}), b = tg::zeros({3, 3});
  REQUIRE_TG_ERROR(tg::cat({}), Contains("cat") && Contains("non-empty"));
  REQUIRE_TG_ERROR(tg::cat({a, b}, 1), Contains("cat") && Contains("[3, 3]") && Contains("position 1"));
  REQUIRE_TG_ERROR(tg::cat({a, tg::scalar_tensor(1)}), Contains("cat") && Contains("0-d"));
  REQUIRE_TG_ERROR(tg::cat({a, a}, 2), Contains("cat") && Contains("out of range"));
  REQUIRE_TG_ERROR(tg::stack({a, b}), Contains("stack") && Contains("[2, 3]") && Contains("[3, 3]"));
  REQUIRE_TG_ERROR(tg::stack({a, a}, 3), Contains("stack") && Contains("out of range"));
  REQUIRE_TG_ERROR(a.split(-1), Contains("split") && Contains("non-negative"));
  REQUIRE_TG_ERROR(a.split(0, 1), Contains("split") && Contains("size 3"));
  REQUIRE_TG_ERROR(a.split({1, 1}, 1), Contains("split") && Contains("sum to 3"));
  REQUIRE_TG_ERROR(a.split({4, -1}, 1), Contains("split") && Contains("non-negative"));
  REQUIRE_TG_ERROR(a.chunk(0), Contains("chunk") && Contains("chunks > 0"));
  REQUIRE_TG_ERROR(tg::scalar_tensor(1).chunk(1), Contains("chunk") && Contains("0-d"));
}

TEST_CASE("cat of inputs that are all skipped [0] tensors still records CatBackward, as PyTorch", "[core][join]") {
  // torch 1.13: a = torch.zeros(0, requires_grad=True); c = torch.cat([a, b]) requires grad
  // (grad_fn CatBackward0), and c.sum().backward() gives a.grad = tensor([]), as it does to every
  // input that requires grad, also beside a constant.
  Tensor a = tg::zeros({0}, tg::kFloat64).requires_grad_();
  Tensor b = tg::zeros({0}, tg::kFloat64).requires_grad_();
  const Tensor constant = tg::zeros({0}, tg::kFloat64);
  const Tensor joined = tg::cat({a, constant, b});
  REQUIRE(joined.shape() == tg::Shape{0});
  REQUIRE(joined.requires_grad());
  CHECK(std::string(joined.grad_fn_name()) == "CatBackward");
  joined.sum().backward();
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK(a.grad().shape() == tg::Shape{0});
  CHECK(b.grad().shape() == tg::Shape{0});
  CHECK(a.grad().dtype() == tg::kFloat64);
  // Nothing that requires grad: nothing recorded.
  CHECK_FALSE(tg::cat({constant, constant}).requires_grad());
  tg::NoGradGuard no_grad;
  CHECK_FALSE(tg::cat({a, b}).requires_grad());
}
