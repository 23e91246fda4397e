// Views, slicing, triangles and creation (view, unsqueeze, squeeze, unflatten, flatten, permute, t,
// expand, narrow, select, slice, tril, triu, arange, tensor from typed vectors): PyTorch fixtures
// (tests/fixtures/make_views_fixtures.py) forward and backward, gradcheck in float64, storage
// sharing and the version counter through views, hand values for int64/bool, and the errors.
#include <functional>
#include <map>

#include "core_test_util.hpp"

using Catch::Matchers::Contains;
using tg::Shape;
using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {

using Op = std::function<Tensor(const Tensor&)>;

// The C++ side of every op case of views.txt, under the fixture's case name.
const std::map<std::string, Op>& ops() {
  static const std::map<std::string, Op> table = {
      {"view_2x3x4_4xm1", [](const Tensor& x) { return x.view({4, -1}); }},
      {"view_6_1x2x1x3", [](const Tensor& x) { return x.view({1, 2, 1, 3}); }},
      {"unsqueeze_2x3_0", [](const Tensor& x) { return x.unsqueeze(0); }},
      {"unsqueeze_2x3_m1", [](const Tensor& x) { return x.unsqueeze(-1); }},
      {"unsqueeze_2x3_1", [](const Tensor& x) { return x.unsqueeze(1); }},
      {"squeeze_2x1x3x1", [](const Tensor& x) { return x.squeeze(); }},
      {"squeeze_2x1x3x1_1", [](const Tensor& x) { return x.squeeze(1); }},
      {"squeeze_2x1x3x1_0", [](const Tensor& x) { return x.squeeze(0); }},
      {"unflatten_3x6x2_1_2xm1", [](const Tensor& x) { return x.unflatten(1, {2, -1}); }},
      {"unflatten_4x12_m1_3x2x2", [](const Tensor& x) { return x.unflatten(-1, {3, 2, 2}); }},
      {"flatten_2x3x4x5", [](const Tensor& x) { return x.flatten(); }},
      {"flatten_2x3x4x5_1_2", [](const Tensor& x) { return x.flatten(1, 2); }},
      {"flatten_2x3x4x5_m2_m1", [](const Tensor& x) { return x.flatten(-2, -1); }},
      {"permute_2x3x4x5_3_0_2_1", [](const Tensor& x) { return x.permute({3, 0, 2, 1}); }},
      {"permute_2x3x4x5_0_2_1_3", [](const Tensor& x) { return tg::permute(x, {0, 2, 1, 3}); }},
      {"permute_2x3x4_m1_0_1", [](const Tensor& x) { return x.permute({-1, 0, 1}); }},
      {"t_3x4", [](const Tensor& x) { return x.t(); }},
      {"expand_3x1_2x3x4", [](const Tensor& x) { return x.expand({2, 3, 4}); }},
      {"expand_1x4_m1x4_to_3x4", [](const Tensor& x) { return x.expand({3, -1}); }},
      {"expand_2x1x3_2x5x3", [](const Tensor& x) { return x.expand({2, 5, 3}); }},
      {"expand_4_2x3x4", [](const Tensor& x) { return x.expand({2, 3, 4}); }},
      {"narrow_3x4x5_1_1_2", [](const Tensor& x) { return x.narrow(1, 1, 2); }},
      {"narrow_3x4x5_m1_m3_2", [](const Tensor& x) { return x.narrow(-1, -3, 2); }},
      {"narrow_3x4x5_0_2_1", [](const Tensor& x) { return x.narrow(0, 2, 1); }},
      {"select_3x4x5_0_1", [](const Tensor& x) { return x.select(0, 1); }},
      {"select_3x4x5_m1_m2", [](const Tensor& x) { return x.select(-1, -2); }},
      {"select_3x4x5_1_3", [](const Tensor& x) { return x.select(1, 3); }},
      {"slice_3x7x5_1_1_none_2", [](const Tensor& x) { return x.slice(1, 1, std::nullopt, 2); }},
      {"slice_3x7x5_2_m4_m1_2", [](const Tensor& x) { return x.slice(2, -4, -1, 2); }},
      {"slice_3x7x5_0_none_none_1", [](const Tensor& x) { return x.slice(0); }},
      {"slice_3x7x5_1_m100_100_3", [](const Tensor& x) { return x.slice(1, -100, 100, 3); }},
      {"slice_3x7x5_1_5_2_1", [](const Tensor& x) { return x.slice(1, 5, 2); }},
      {"tril_4x5", [](const Tensor& x) { return x.tril(); }},
      {"tril_2x3x4x5_1", [](const Tensor& x) { return tg::tril(x, 1); }},
      {"tril_5x3_m1", [](const Tensor& x) { return x.tril(-1); }},
      {"triu_4x5", [](const Tensor& x) { return x.triu(); }},
      {"triu_2x3x4x5_m2", [](const Tensor& x) { return tg::triu(x, -2); }},
      {"triu_5x3_2", [](const Tensor& x) { return x.triu(2); }},
      {"tril_3x3_100", [](const Tensor& x) { return x.tril(100); }},
      {"triu_3x3_m100", [](const Tensor& x) { return x.triu(-100); }},
      {"attention_layout_2x5x24",
       [](const Tensor& x) {
         const Tensor qkv = x.view({2, 5, 3, 2, 4}).permute({2, 0, 3, 1, 4});  // [3, B, H, T, D]
         const Tensor heads = qkv.select(0, 0) * qkv.select(0, 1) + qkv.select(0, 2);
         return heads.permute({0, 2, 1, 3}).flatten(2);  // [B, T, H·D]
       }},
  };
  return table;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& entry : ops()) names.push_back(entry.first);
  return names;
}

}  // namespace

TEST_CASE("views, slicing and triangles match PyTorch forward and backward", "[core][views][fixture]") {
  const std::string name = GENERATE(from_range(op_names()));
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  INFO(name << suffix);
  const auto& c = fixture("views.txt", name + suffix);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  const Tensor y = ops().at(name)(x);
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  TG_REQUIRE_NEAR(x.grad(), c.at("dx"), tol);
}

TEST_CASE("gradcheck: views, slicing and triangles", "[core][views][gradcheck]") {
  const std::string name = GENERATE(from_range(op_names()));
  INFO(name);
  tg::manual_seed(7);
  const Tensor x = random_leaf(fixture("views.txt", name + "_f64").at("x").shape());
  const Op& op = ops().at(name);
  // Squared, so that the check also sees the gradient routed through a nonlinear use.
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return op(in[0]).pow(2); }, (std::vector<Tensor>{x}));
}

TEST_CASE("arange matches torch.arange", "[core][views][creation][fixture]") {
  using Make = std::function<Tensor()>;
  const std::vector<std::pair<std::string, Make>> cases = {
      {"arange_5", [] { return tg::arange(5); }},
      {"arange_2_11_3", [] { return tg::arange(2, 11, 3); }},
      {"arange_1_m5_m2", [] { return tg::arange(1, -5, -2); }},
      {"arange_0_0", [] { return tg::arange(0, 0); }},
      {"arange_big", [] { return tg::arange(int64_t{1} << 60 | 1, (int64_t{1} << 60) + 5); }},
      {"arange_0p5_3p7_1_int64", [] { return tg::arange(0.5, 3.7, 1, tg::kInt64); }},
      {"arange_0_1_0p1", [] { return tg::arange(0, 1, 0.1); }},
      {"arange_0_1_0p1_f64", [] { return tg::arange(0, 1, 0.1, tg::kFloat64); }},
      {"arange_m1p5_2p5_0p3", [] { return tg::arange(-1.5, 2.5, 0.3); }},
      {"arange_10_0_m3_f32", [] { return tg::arange(10, 0, -3, tg::kFloat32); }},
      {"arange_4p5", [] { return tg::arange(4.5); }},
      {"arange_1_2p0000001_0p25_f64", [] { return tg::arange(1, 2.0000001, 0.25, tg::kFloat64); }},
  };
  for (const auto& [name, make] : cases) {
    INFO(name);
    const auto& c = fixture("views.txt", name);
    const Tensor y = make();
    CHECK(y.shape() == c.ints("shape"));
    if (c.tensors.count("y") > 0) {
      // start + i·step rounded once; PyTorch's vector kernel rounds the first value of each vector
      // of 8 to float32 first and adds k·step to it, which may differ in the last bit.
      REQUIRE(y.dtype() == c.at("y").dtype());
      TG_REQUIRE_NEAR(y, c.at("y"), y.dtype() == tg::kFloat32 ? 1e-7 : 1e-15);
    } else {
      REQUIRE(y.dtype() == tg::kInt64);
      CHECK(y.to_vector<int64_t>() == c.ints("y"));
    }
  }
}

TEST_CASE("arange: dtypes and errors", "[core][views][creation]") {
  CHECK(tg::arange(3).dtype() == tg::kInt64);
  CHECK(tg::arange(3u).dtype() == tg::kInt64);
  CHECK(tg::arange(3.0).dtype() == tg::kFloat32);
  CHECK(tg::arange(0, 3, 1.0).dtype() == tg::kFloat32);
  CHECK(tg::arange(3, tg::kFloat64).to_vector<double>() == std::vector<double>{0, 1, 2});
  // The extreme int64 range: i·step alone overflows, the values do not.
  CHECK(tg::arange(INT64_MIN, INT64_MAX, INT64_MAX).to_vector<int64_t>() ==
        std::vector<int64_t>{INT64_MIN, -1, INT64_MAX - 1});
  REQUIRE_TG_ERROR(tg::arange(0, 5, 0), Contains("arange") && Contains("step must be nonzero"));
  REQUIRE_TG_ERROR(tg::arange(0, -5, 1), Contains("arange") && Contains("step sign"));
  REQUIRE_TG_ERROR(tg::arange(0.0, 5.0, -0.5), Contains("step sign"));
  REQUIRE_TG_ERROR(tg::arange(0, 2.5, 0.5, tg::kInt64), Contains("step must be nonzero"));
  REQUIRE_TG_ERROR(tg::arange(0.0, std::numeric_limits<double>::infinity()), Contains("unsupported range"));
  REQUIRE_TG_ERROR(tg::arange(5, tg::kBool), Contains("arange") && Contains("bool"));
  REQUIRE_TG_ERROR(tg::arange(uint64_t{1} << 63), Contains("int64"));
}

TEST_CASE("tensor from typed vectors keeps the values exact", "[core][views][creation]") {
  const int64_t big = (int64_t{1} << 60) + 1;  // not a double
  const Tensor i = tg::tensor(std::vector<int64_t>{big, -3, 0});
  CHECK(i.dtype() == tg::kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{big, -3, 0});
  CHECK(tg::tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}).shape() == Shape{2, 3});
  CHECK(tg::tensor(std::vector<int64_t>{2, 0}, {}, tg::kFloat64).to_vector<double>() == std::vector<double>{2, 0});
  const std::vector<float> floats = {0.1f, -2.5f, 1e-30f};
  const Tensor f = tg::tensor(floats);
  CHECK(f.dtype() == tg::kFloat32);
  CHECK(f.to_vector<float>() == floats);  // no rounding through double changes them either
  const Tensor b = tg::tensor(std::vector<bool>{true, false, true}, {1, 3});
  CHECK(b.dtype() == tg::kBool);
  CHECK(b.shape() == Shape{1, 3});
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(tg::tensor(std::vector<bool>{true, false}, {}, tg::kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  // A braced list still means what it always meant: float32 values (or the dtype given).
  CHECK(tg::tensor({1, 2, 3}).dtype() == tg::kFloat32);
  CHECK(tg::tensor({1.5, 2}, {2, 1}).dtype() == tg::kFloat32);
  CHECK(tg::tensor({3, 1}, {}, tg::kInt64).to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  REQUIRE_TG_ERROR(tg::tensor(std::vector<int64_t>{1, 2, 3}, {2, 2}), Contains("tensor") && Contains("[2, 2]"));
}

TEST_CASE("view ops share storage; a write through one is seen by the other", "[core][views]") {
  using View = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, View>> views = {
      {"view", [](const Tensor& t) { return t.view({3, 2}); }},
      {"unsqueeze", [](const Tensor& t) { return t.unsqueeze(1); }},
      {"squeeze", [](const Tensor& t) { return t.unsqueeze(0).squeeze(); }},
      {"squeeze(dim)", [](const Tensor& t) { return t.unsqueeze(2).squeeze(2); }},
      {"unflatten", [](const Tensor& t) { return t.unflatten(1, {3, 1}); }},
      {"flatten", [](const Tensor& t) { return t.flatten(); }},
  };
  for (const auto& [what, make] : views) {
    INFO(what);
    Tensor x = tg::zeros({2, 3});
    Tensor v = make(x);
    CHECK(v.data<float>() == x.data<float>());
    v.mutable_data<float>()[4] = 7.0f;
    CHECK(x.to_vector<float>()[4] == 7.0f);
    x.fill_(2.0);
    CHECK(v.to_vector<float>() == std::vector<float>(6, 2.0f));
  }
  const Tensor x = tg::ones({2, 3});
  CHECK(x.contiguous().is_same(x));
}

TEST_CASE("a tensor saved for backward and written through a view is refused", "[core][views][version]") {
  using View = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, View>> views = {
      {"view", [](const Tensor& t) { return t.view({-1}); }},
      {"unsqueeze", [](const Tensor& t) { return t.unsqueeze(0); }},
      {"squeeze", [](const Tensor& t) { return t.squeeze(); }},
      {"unflatten", [](const Tensor& t) { return t.unflatten(0, {2, 2}); }},
      {"flatten", [](const Tensor& t) { return t.flatten(); }},
  };
  for (const auto& [what, make] : views) {
    INFO(what);
    Tensor w = tg::tensor({1, 2, 3, 4}, {}, tg::kFloat64).requires_grad_();
    const Tensor e = w.exp();  // ExpBackward saves its output e
    const Tensor loss = e.sum();
    {
      tg::NoGradGuard no_grad;
      Tensor v = make(e);
      v.fill_(1.0);
    }
    CHECK_THROWS_WITH(loss.backward(), Contains("ExpBackward") && Contains("[4]"));
  }
  // A view of an input taken before a write, and the write made through the input: the same.
  Tensor w = tg::tensor({1, 2, 3, 4}, {}, tg::kFloat64).requires_grad_();
  Tensor x = tg::full({2, 2}, 3.0, tg::kFloat64);
  const Tensor loss = (w * x.view({4})).sum();  // MulBackward saves the view of x
  x.fill_(5.0);
  CHECK_THROWS_WITH(loss.backward(), Contains("MulBackward"));
}

TEST_CASE("copying ops do not share storage", "[core][views]") {
  Tensor x = tg::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<Tensor> copies = {x.permute({1, 0}), x.expand({2, 2, 3}), x.narrow(1, 0, 3), x.select(0, 1),
                                      x.slice(1), x.t(), x.tril(5)};
  x.fill_(0.0);
  CHECK(copies[0].to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(copies[1].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  CHECK(copies[2].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(copies[3].to_vector<float>() == std::vector<float>{4, 5, 6});
  CHECK(copies[4].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(copies[5].to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(copies[6].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("int64 and bool tensors through the view and slicing ops, by hand", "[core][views]") {
  const Tensor i = tg::arange(12).view({3, 4});  // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
  CHECK(i.select(1, -1).to_vector<int64_t>() == std::vector<int64_t>{3, 7, 11});
  CHECK(i.narrow(0, 1, 2).to_vector<int64_t>() == std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(i.slice(1, 1, std::nullopt, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 5, 7, 9, 11});
  CHECK(i.slice(0, -1).to_vector<int64_t>() == std::vector<int64_t>{8, 9, 10, 11});
  CHECK(i.slice(0, 2, 1).shape() == Shape{0, 4});
  CHECK(i.t().to_vector<int64_t>() == std::vector<int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(i.permute({1, 0}).to_vector<int64_t>() == i.t().to_vector<int64_t>());
  CHECK(i.select(0, 0).unsqueeze(0).expand({2, 4}).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(i.triu(1).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
  CHECK(i.tril(-1).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
  // A causal mask the way attention code writes it: true where a query may attend.
  const Tensor causal = tg::ones({3, 3}, tg::kBool).tril();
  CHECK(causal.dtype() == tg::kBool);
  CHECK(causal.to_vector<bool>() == std::vector<bool>{true, false, false, true, true, false, true, true, true});
  CHECK(causal.select(0, 1).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(causal.unsqueeze(0).expand({2, 3, 3}).shape() == Shape{2, 3, 3});
  // Batched triangles: each [R, C] matrix of a [2, 2, 3] tensor on its own.
  CHECK(tg::ones({2, 2, 3}, tg::kInt64).triu().to_vector<int64_t>() ==
        std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1});
  // Edge shapes: 0-d and 1-d through the views, empty dims through the copies.
  const Tensor s = tg::scalar_tensor(2.0);
  CHECK(s.unsqueeze(0).shape() == Shape{1});
  CHECK(s.flatten().shape() == Shape{1});
  CHECK(s.squeeze(0).shape() == Shape{});
  CHECK(s.t().dim() == 0);
  CHECK(s.expand({3}).to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK(tg::zeros({0, 3}).permute({1, 0}).shape() == Shape{3, 0});
  CHECK(tg::zeros({2, 3}).expand({0, 2, 3}).shape() == Shape{0, 2, 3});
  CHECK(tg::zeros({0, 4}).tril().shape() == Shape{0, 4});
}

TEST_CASE("the slicing family's copies agree at every thread count", "[core][views][threads]") {
  // One parallel pass over rows: large enough for several chunks.
  tg::manual_seed(3);
  const Tensor x = tg::randn({12, 64, 3, 4, 32});
  const int previous = tg::get_num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    tg::set_num_threads(threads);
    const Tensor y = x.permute({2, 0, 3, 1, 4}).slice(3, 1, std::nullopt, 3).narrow(4, 5, 20).expand({2, 3, 12, 4, 21, 20});
    results.push_back(y.to_vector<float>());
  }
  tg::set_num_threads(previous);
  CHECK(results[0] == results[1]);
  // And the values are the ones picked: y[a, b, c, d, e, f] = x[b, 1 + 3·e, a', c, 5 + f].
  const Tensor y = x.permute({2, 0, 3, 1, 4}).slice(3, 1, std::nullopt, 3).narrow(4, 5, 20);
  CHECK(y.shape() == Shape{3, 12, 4, 21, 20});
  CHECK(y.select(0, 2).select(0, 7).select(0, 1).select(0, 4).select(0, 6).item() ==
        x.select(0, 7).select(0, 13).select(0, 2).select(0, 1).select(0, 11).item());
}

TEST_CASE("bad dims and sizes throw tg::Error naming the op and the shape", "[core][views][errors]") {
  const Tensor x = tg::zeros({2, 3});
  REQUIRE_TG_ERROR(x.view({4, -1}), Contains("view") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.view({-1, -1}), Contains("view") && Contains("-1"));
  REQUIRE_TG_ERROR(x.unsqueeze(3), Contains("unsqueeze") && Contains("dim 3"));
  REQUIRE_TG_ERROR(x.squeeze(2), Contains("squeeze") && Contains("dim 2"));
  REQUIRE_TG_ERROR(x.unflatten(1, {2, 2}), Contains("unflatten") && Contains("[2, 2]") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.unflatten(1, {}), Contains("unflatten"));
  REQUIRE_TG_ERROR(tg::scalar_tensor(1.0).unflatten(0, {1}), Contains("unflatten") && Contains("0-d"));
  REQUIRE_TG_ERROR(x.flatten(1, 0), Contains("flatten") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.permute({0, 0}), Contains("permute") && Contains("repeated"));
  REQUIRE_TG_ERROR(x.permute({0}), Contains("permute") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.permute({0, 2}), Contains("permute") && Contains("dim 2"));
  REQUIRE_TG_ERROR(x.expand({2, 4}), Contains("expand") && Contains("[2, 4]") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.expand({3}), Contains("expand") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.expand({-1, 2, 3}), Contains("expand") && Contains("leading"));
  REQUIRE_TG_ERROR(x.narrow(1, 2, 2), Contains("narrow") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.narrow(1, 4, 0), Contains("narrow") && Contains("start 4"));
  REQUIRE_TG_ERROR(x.narrow(1, 1, -1), Contains("narrow") && Contains("length"));
  REQUIRE_TG_ERROR(x.narrow(2, 0, 1), Contains("narrow") && Contains("dim 2"));
  REQUIRE_TG_ERROR(tg::scalar_tensor(1.0).narrow(0, 0, 1), Contains("narrow") && Contains("0-d"));
  REQUIRE_TG_ERROR(x.select(1, 3), Contains("select") && Contains("index 3") && Contains("[2, 3]"));
  REQUIRE_TG_ERROR(x.select(0, -3), Contains("select") && Contains("index -3"));
  REQUIRE_TG_ERROR(tg::scalar_tensor(1.0).select(0, 0), Contains("select") && Contains("0-d"));
  REQUIRE_TG_ERROR(x.slice(1, 0, 2, 0), Contains("slice") && Contains("step"));
  REQUIRE_TG_ERROR(x.slice(1, 0, 2, -1), Contains("slice") && Contains("step"));
  REQUIRE_TG_ERROR(x.slice(2), Contains("slice") && Contains("dim 2"));
  REQUIRE_TG_ERROR(tg::zeros({2, 3, 4}).t(), Contains("t:") && Contains("[2, 3, 4]"));
  REQUIRE_TG_ERROR(tg::zeros({3}).tril(), Contains("tril") && Contains("[3]"));
  REQUIRE_TG_ERROR(tg::zeros({3}).triu(), Contains("triu") && Contains("[3]"));
  REQUIRE_TG_ERROR(Tensor().view({1}), Contains("view"));
  REQUIRE_TG_ERROR(Tensor().permute({}), Contains("permute"));
}
