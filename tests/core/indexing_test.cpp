// index_select, gather, scatter_add: PyTorch fixtures with repeated indices, values by hand,
// gradcheck, out-of-range indices and shape errors, and the same bits at any thread count.
#include "core_test_util.hpp"
#include "support/dim_ops.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::int64_tensor;
using tg::testing::int64_values;
using tg::testing::leaf;
using tg::testing::random_leaf;

TEST_CASE("index_select and gather match PyTorch forward and backward", "[core][indexing][fixture]") {
  const std::string name =
      GENERATE(as<std::string>{}, "index_select_4x5_dim0", "index_select_4x5_dim1", "index_select_2x3x2_dim1",
               "gather_3x4_dim1", "gather_3x4_dim0", "gather_2x3x2_dim1");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", name + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const int64_t dim = name.back() - '0';
  const Tensor index = int64_tensor(c, "index");
  const Tensor y = name.rfind("gather", 0) == 0 ? x.gather(dim, index) : tg::index_select(x, dim, index);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("scatter_add matches PyTorch forward and backward", "[core][indexing][fixture]") {
  const std::string name =
      GENERATE(as<std::string>{}, "scatter_add_3x5_dim1", "scatter_add_4x3_dim0", "scatter_add_2x2x3_dim2");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("indexing.txt", name + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x")), src = leaf(c.at("src"));
  const Tensor y = x.scatter_add(name.back() - '0', int64_tensor(c, "index"), src);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
  TG_REQUIRE_NEAR(src.grad(), c.at("dsrc"), tol);
}

TEST_CASE("indexing by hand: repeats, 0-d, empty and smaller index tensors", "[core][indexing]") {
  const Tensor x = tg::tensor({0, 1, 2, 10, 11, 12}, {2, 3}, tg::kFloat64);
  const Tensor cols = x.index_select(1, int64_values({2, 2, 0}, {3}));
  CHECK(cols.shape() == tg::Shape{2, 3});
  CHECK(cols.to_vector<double>() == std::vector<double>{2, 2, 0, 12, 12, 10});
  CHECK(x.index_select(0, int64_values({}, {0})).shape() == tg::Shape{0, 3});
  CHECK(x.index_select(0, tg::scalar_tensor(1, tg::kInt64)).to_vector<double>() == std::vector<double>{10, 11, 12});
  CHECK(tg::scalar_tensor(4.0).index_select(0, int64_values({0}, {1})).item() == 4.0);
  // Repeated indices add their gradients.
  Tensor w = tg::tensor({1, 2, 3}, {}, tg::kFloat64).requires_grad_();
  w.index_select(0, int64_values({2, 0, 2, 2}, {4})).sum().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{1, 0, 3});

  // Selecting only moves values: int64 labels and bool masks are selected too.
  const Tensor labels = int64_values({7, 8, 9}, {3});
  CHECK(labels.index_select(0, int64_values({2, 0}, {2})).to_vector<int64_t>() == std::vector<int64_t>{9, 7});
  CHECK(labels.gather(0, int64_values({1, 1}, {2})).to_vector<int64_t>() == std::vector<int64_t>{8, 8});
  const Tensor mask = tg::tensor({1, 0}, {}, tg::kBool).index_select(0, int64_values({1, 0, 0}, {3}));
  CHECK(mask.to_vector<bool>() == std::vector<bool>{false, true, true});

  // gather with an index smaller than x in the other dim: out[i][j] = x[i][index[i][j]]
  const Tensor g = x.gather(1, int64_values({2, 0}, {1, 2}));
  CHECK(g.shape() == tg::Shape{1, 2});
  CHECK(g.to_vector<double>() == std::vector<double>{2, 0});
  CHECK(x.gather(0, int64_values({}, {0, 3})).shape() == tg::Shape{0, 3});

  // scatter_add: out = x, then out[i][index[i][j]] += src[i][j]; src may be larger than index.
  const Tensor src = tg::tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, tg::kFloat64);
  const Tensor s = tg::zeros({2, 3}, tg::kFloat64).scatter_add(1, int64_values({1, 1, 0, 2, 2, 2}, {2, 3}), src);
  CHECK(s.to_vector<double>() == std::vector<double>{3, 3, 0, 0, 0, 18});
  // The src elements outside the index get no gradient.
  Tensor src_leaf = src.clone().requires_grad_();
  tg::zeros({2, 3}, tg::kFloat64).scatter_add(1, int64_values({1, 1, 0, 2, 2, 2}, {2, 3}), src_leaf).sum().backward();
  CHECK(src_leaf.grad().to_vector<double>() == std::vector<double>{1, 1, 1, 0, 1, 1, 1, 0});
  // scatter_add does not touch its input.
  const Tensor base = tg::zeros({3});
  base.scatter_add(0, int64_values({1}, {1}), tg::ones({1}));
  CHECK(base.to_vector<float>() == std::vector<float>{0, 0, 0});
}

TEST_CASE("indexing ops pass gradcheck in float64", "[core][indexing][gradcheck]") {
  const Tensor x = random_leaf({3, 4, 2});
  const Tensor index1d = int64_values({3, 0, 3, 1, 3}, {5});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].index_select(1, index1d); },
                       (std::vector<Tensor>{x}));
  TG_REQUIRE_GRADCHECK(
      [&](const std::vector<Tensor>& in) {
        return in[0].index_select(-1, int64_values({1, 1}, {2}));
      },
      (std::vector<Tensor>{x}));
  const Tensor gather_index = int64_values({2, 2, 0, 1, 0, 0, 1, 2}, {2, 2, 2});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].gather(0, gather_index); },
                       (std::vector<Tensor>{x}));
  const Tensor src = random_leaf({2, 3, 2});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return in[0].scatter_add(0, gather_index, in[1]); },
                       (std::vector<Tensor>{x, src}));
}

TEST_CASE("indexing refuses bad indices and shapes with tg::Error", "[core][indexing][errors]") {
  using Catch::Matchers::Contains;
  const Tensor x = tg::zeros({2, 3});
  REQUIRE_TG_ERROR(x.index_select(1, int64_values({0, 3}, {2})),
                   Contains("index_select") && Contains("index 3 is out of range for dim 1 of size 3"));
  REQUIRE_TG_ERROR(x.index_select(0, int64_values({-1}, {1})), Contains("index_select") && Contains("index -1"));
  REQUIRE_TG_ERROR(x.index_select(0, tg::zeros({1})), Contains("index_select") && Contains("int64"));
  REQUIRE_TG_ERROR(x.index_select(0, int64_values({0, 0}, {1, 2})), Contains("index_select") && Contains("1-D"));
  REQUIRE_TG_ERROR(x.index_select(2, int64_values({0}, {1})), Contains("index_select") && Contains("out of range"));
  REQUIRE_TG_ERROR(x.gather(1, int64_values({5}, {1, 1})),
                   Contains("gather") && Contains("index 5 is out of range for dim 1 of size 3"));
  REQUIRE_TG_ERROR(x.gather(1, int64_values({0}, {1})), Contains("gather") && Contains("as many dims"));
  REQUIRE_TG_ERROR(x.gather(1, int64_values({0, 0, 0}, {3, 1})),
                   Contains("gather") && Contains("larger than the input"));
  REQUIRE_TG_ERROR(x.scatter_add(0, int64_values({2}, {1, 1}), tg::ones({1, 1})),
                   Contains("scatter_add") && Contains("index 2 is out of range for dim 0 of size 2"));
  REQUIRE_TG_ERROR(x.scatter_add(0, int64_values({0, 0}, {1, 2}), tg::ones({1, 1})),
                   Contains("scatter_add") && Contains("larger than src"));
  REQUIRE_TG_ERROR(x.scatter_add(0, int64_values({0}, {1, 1}), tg::ones({1, 1}, tg::kFloat64)),
                   Contains("scatter_add") && Contains("dtypes differ"));
  REQUIRE_TG_ERROR(tg::zeros({2}, tg::kInt64).scatter_add(0, int64_values({0}, {1}), tg::zeros({1}, tg::kInt64)),
                   Contains("scatter_add") && Contains("int64"));
}

TEST_CASE("indexing backward gives the same bits at any thread count", "[core][indexing][threads]") {
  tg::manual_seed(11);
  Tensor x = tg::randn({64, 700}).requires_grad_();
  const Tensor rows = tg::randint(0, 64, {5000});
  const Tensor cols = tg::randint(0, 700, {64, 900});
  Tensor src = tg::randn({64, 900}).requires_grad_();
  tg::testing::require_same_bits_at_any_thread_count([&] {
    x.set_grad(Tensor());
    src.set_grad(Tensor());
    const Tensor picked = x.index_select(0, rows), gathered = x.gather(1, cols),
                 scattered = x.scatter_add(1, cols, src);
    ((picked * picked).sum() + (gathered * gathered).sum() + (scattered * scattered).sum()).backward();
    return std::vector<Tensor>{picked, gathered, scattered, x.grad(), src.grad()};
  });
}

TEST_CASE("gather and scatter_add count a 0-d tensor as one dim, as PyTorch", "[core][indexing]") {
  // torch 1.13: x = torch.tensor(3., requires_grad=True); torch.gather(x, 0, torch.tensor([0]))
  // is tensor([3.]) of shape [1]; backward with [2.] gives x.grad = tensor(2.) (0-d).
  Tensor x = tg::scalar_tensor(3.0, tg::kFloat64).requires_grad_();
  const Tensor y = tg::gather(x, 0, int64_values({0}, {1}));
  REQUIRE(y.shape() == tg::Shape{1});
  CHECK(y.item() == 3.0);
  y.backward(tg::tensor({2.0}, {1}, tg::kFloat64));
  REQUIRE(x.grad().shape() == tg::Shape{});
  CHECK(x.grad().item() == 2.0);
  // Repeats too (torch: tensor([3., 3.])), dim -1, and a 0-d index into a [3] input (torch: tensor(3.)).
  CHECK(x.gather(-1, int64_values({0, 0}, {2})).to_vector<double>() == std::vector<double>{3, 3});
  const Tensor picked = tg::tensor({1, 2, 3}, {}, tg::kFloat64).gather(0, tg::scalar_tensor(2, tg::kInt64));
  CHECK(picked.shape() == tg::Shape{});
  CHECK(picked.item() == 3.0);
  // scatter_add the same way: torch.scatter_add(torch.tensor(1.), 0, torch.tensor([0]), torch.tensor([5.])) = 6.
  const Tensor added = tg::scalar_tensor(1.0).scatter_add(0, int64_values({0}, {1}), tg::tensor({5.0}, {1}));
  CHECK(added.shape() == tg::Shape{});
  CHECK(added.item() == 6.0);
  // Still refused: an index past the single element, and a 2-d index for a 0-d input.
  REQUIRE_TG_ERROR(x.gather(0, int64_values({1}, {1})), Catch::Contains("gather") && Catch::Contains("index 1"));
  REQUIRE_TG_ERROR(x.gather(0, int64_values({0}, {1, 1})), Catch::Contains("gather") && Catch::Contains("as many dims"));
}
