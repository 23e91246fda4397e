// sort, argsort, topk and multinomial: PyTorch fixtures (tests/fixtures/sort.txt, written by
// tests/fixtures/make_sort_fixtures.py) for values, indices, gradients and multinomial's exact
// draws; hand-derived cases for ties, NaN and 0-d; a frequency check; thread counts; errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "core_test_util.hpp"
#include "support/tensor_equal.hpp"

using tg::Tensor;
using tg::testing::fixture;
using tg::testing::leaf;
using Catch::Matchers::Contains;

namespace {

const std::map<std::string, tg::testing::FixtureCase>& all_cases() { return tg::testing::load_fixtures("sort.txt"); }

// The names of the fixture cases that start with `prefix` and end with `suffix`.
std::vector<std::string> case_names(const std::string& prefix, const std::string& suffix) {
  std::vector<std::string> names;
  for (const auto& [name, c] : all_cases())
    if (name.starts_with(prefix) && name.ends_with(suffix)) names.push_back(name);
  return names;
}

// An int64 fixture tensor: flat values and, unless given, the shape of `shape_of`.
Tensor int64_tensor(const std::vector<int64_t>& values, const tg::Shape& shape) {
  const std::vector<double> as_double(values.begin(), values.end());
  return tg::tensor(as_double, shape, tg::kInt64);
}

tg::Shape shape_from(const std::vector<int64_t>& dims) { return tg::Shape(dims.begin(), dims.end()); }

// REQUIRE exact equality (dtype, shape, every element; NaN equals NaN, −0 differs from +0).
void require_equal(const Tensor& actual, const Tensor& expected) {
  INFO("actual:   " << actual << "\nexpected: " << expected);
  REQUIRE(tg::testing::equal(actual, expected));
}

}  // namespace

TEST_CASE("sort matches torch.sort(stable=True): values, indices and gradient, ties kept in order",
          "[core][sort][fixture]") {
  const std::vector<std::string> names = case_names("sort_", "f32");
  std::vector<std::string> f64 = case_names("sort_", "f64");
  std::vector<std::string> all = names;
  all.insert(all.end(), f64.begin(), f64.end());
  REQUIRE(all.size() >= 30);
  for (const std::string& name : all) {
    INFO(name);
    const auto& c = fixture("sort.txt", name);
    const int64_t dim = static_cast<int64_t>(c.scalar("dim"));
    const bool descending = c.scalar("descending") != 0.0;
    Tensor x = leaf(c.at("x"));
    const auto [values, indices] = x.sort(dim, descending);
    // Sorting moves values: they are PyTorch's bit for bit (NaN and the sign of zero included).
    require_equal(values, c.at("values"));
    require_equal(indices, int64_tensor(c.ints("indices"), values.shape()));
    require_equal(x.argsort(dim, descending), indices);
    require_equal(tg::sort(x, dim, descending).indices, indices);
    require_equal(tg::argsort(x, dim, descending), indices);
    if (c.has("dy")) {
      CHECK(std::string(values.grad_fn_name()) == "SortBackward");
      values.backward(c.at("dy"));
      require_equal(x.grad(), c.at("dx"));
    }
  }
}

TEST_CASE("sort of int64 matches torch.sort", "[core][sort][fixture]") {
  const std::vector<std::string> names = case_names("sort_", "i64");
  REQUIRE(names.size() >= 15);
  for (const std::string& name : names) {
    INFO(name);
    const auto& c = fixture("sort.txt", name);
    const Tensor x = int64_tensor(c.ints("x"), shape_from(c.ints("shape")));
    const int64_t dim = static_cast<int64_t>(c.scalar("dim"));
    const auto [values, indices] = x.sort(dim, c.scalar("descending") != 0.0);
    require_equal(values, int64_tensor(c.ints("values"), x.shape()));
    require_equal(indices, int64_tensor(c.ints("indices"), x.shape()));
    CHECK_FALSE(values.requires_grad());
  }
}

TEST_CASE("topk matches torch.topk on distinct values: values, indices and gradient", "[core][topk][fixture]") {
  std::vector<std::string> all = case_names("topk_", "f32");
  const std::vector<std::string> f64 = case_names("topk_", "f64");
  all.insert(all.end(), f64.begin(), f64.end());
  REQUIRE(all.size() >= 40);
  for (const std::string& name : all) {
    INFO(name);
    const auto& c = fixture("sort.txt", name);
    const int64_t k = static_cast<int64_t>(c.scalar("k")), dim = static_cast<int64_t>(c.scalar("dim"));
    const bool largest = c.scalar("largest") != 0.0;
    Tensor x = leaf(c.at("x"));
    const auto [values, indices] = x.topk(k, dim, largest);
    require_equal(values, c.at("values"));
    require_equal(indices, int64_tensor(c.ints("indices"), values.shape()));
    // sorted = false gives the same, and the free form is the method.
    require_equal(x.topk(k, dim, largest, false).indices, indices);
    require_equal(tg::topk(x, k, dim, largest).values, values);
    if (c.has("dy")) {
      values.backward(c.at("dy"));
      require_equal(x.grad(), c.at("dx"));
    }
  }
}

TEST_CASE("topk of int64 matches torch.topk", "[core][topk][fixture]") {
  const std::vector<std::string> names = case_names("topk_", "i64");
  REQUIRE(names.size() >= 20);
  for (const std::string& name : names) {
    INFO(name);
    const auto& c = fixture("sort.txt", name);
    const Tensor x = int64_tensor(c.ints("x"), shape_from(c.ints("shape")));
    const int64_t k = static_cast<int64_t>(c.scalar("k")), dim = static_cast<int64_t>(c.scalar("dim"));
    const auto [values, indices] = x.topk(k, dim, c.scalar("largest") != 0.0);
    require_equal(values, int64_tensor(c.ints("values"), values.shape()));
    require_equal(indices, int64_tensor(c.ints("indices"), values.shape()));
  }
}

TEST_CASE("sort and topk by hand: stability both ways, ties in topk lower index first, 0-d, empty", "[core][sort]") {
  const Tensor x = tg::tensor({2, 1, 2, 1, 3});
  // Descending keeps equal values in their order too (torch.sort(stable=True, descending=True)).
  require_equal(x.sort(0, true).indices, int64_tensor({4, 0, 2, 1, 3}, {5}));
  require_equal(x.sort().indices, int64_tensor({1, 3, 0, 2, 4}, {5}));
  // topk is the first k of the stable sort: of the two 2s, index 0 first; of the two 1s, index 1.
  require_equal(x.topk(2).indices, int64_tensor({4, 0}, {2}));
  require_equal(x.topk(3).indices, int64_tensor({4, 0, 2}, {3}));
  require_equal(x.topk(1, -1, false).indices, int64_tensor({1}, {1}));
  // −0 equals +0: their order is kept either way.
  const Tensor zeros = tg::tensor({0.0, -0.0, 0.0});
  require_equal(zeros.sort().indices, int64_tensor({0, 1, 2}, {3}));
  require_equal(zeros.sort(0, true).indices, int64_tensor({0, 1, 2}, {3}));
  // 0-d: one line of one element (k may be 0 or 1, as in PyTorch).
  const Tensor scalar = tg::scalar_tensor(4.5);
  const auto [v, i] = scalar.sort();
  CHECK(v.dim() == 0);
  CHECK(v.item() == 4.5);
  CHECK(i.item<int64_t>() == 0);
  CHECK(scalar.topk(1).values.item() == 4.5);
  // Empty lines and k = 0.
  const auto empty = tg::zeros({2, 0}).sort(1);
  CHECK(empty.values.shape() == tg::Shape{2, 0});
  CHECK(tg::zeros({3, 4}).topk(0).indices.shape() == tg::Shape{3, 0});
  CHECK(tg::zeros({0, 4}).topk(2).values.shape() == tg::Shape{0, 2});
}

TEST_CASE("topk's gradient passes gradcheck in float64", "[core][topk][gradcheck]") {
  tg::manual_seed(3);
  const Tensor x = tg::testing::random_leaf({3, 5, 4});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].topk(2, 1).values; }, std::vector<Tensor>{x});
  TG_REQUIRE_GRADCHECK([](const std::vector<Tensor>& in) { return in[0].sort(0, true).values; }, std::vector<Tensor>{x});
}

TEST_CASE("sort and topk give the same bits at any thread count", "[core][sort][threads]") {
  tg::manual_seed(11);
  const Tensor x = tg::randn({513, 37}).to(tg::kFloat64) * 0.0;  // all ties: stability decides
  const Tensor y = tg::randint(-5, 5, {700, 91}).to(tg::kFloat32);
  std::vector<Tensor> reference;
  for (int threads : {1, 2, 3, 8}) {
    INFO(threads << " threads");
    tbb::task_arena arena(threads);
    std::vector<Tensor> results;
    arena.execute([&] {
      results = {x.sort(0).indices, y.sort(1, true).indices, y.topk(7, 1).indices, y.topk(30, 0, false).indices};
    });
    if (reference.empty()) {
      reference = results;
      // Every element equal: the stable order is the identity along dim 0.
      const std::vector<int64_t> got = results[0].to_vector<int64_t>();
      for (int64_t row = 0; row < 513; ++row)
        for (int64_t col = 0; col < 37; ++col) REQUIRE(got[row * 37 + col] == row);
    }
    for (size_t r = 0; r < results.size(); ++r) require_equal(results[r], reference[r]);
  }
}

TEST_CASE("multinomial draws torch.multinomial's indices for the same seed", "[core][multinomial][fixture]") {
  const std::vector<std::string> names = case_names("multinomial_w", "");
  REQUIRE(names.size() >= 40);
  for (const std::string& name : names) {
    INFO(name);
    const auto& c = fixture("sort.txt", name);
    tg::Generator gen(static_cast<uint64_t>(c.scalar("seed")));
    const Tensor& weights = c.at("weights");
    const int64_t num_samples = static_cast<int64_t>(c.scalar("num_samples"));
    const bool replacement = c.scalar("replacement") != 0.0;
    const Tensor drawn = tg::multinomial(weights, num_samples, replacement, gen);
    const tg::Shape shape =
        weights.dim() == 2 ? tg::Shape{weights.size(0), num_samples} : tg::Shape{num_samples};
    require_equal(drawn, int64_tensor(c.ints("indices"), shape));
    // The same number of words consumed: the next draws agree too.
    require_equal(tg::rand({3}, gen, tg::kFloat64), c.at("after"));
    // Category 1 weighs 0: never drawn.
    for (int64_t index : drawn.to_vector<int64_t>()) CHECK(index != 1);
  }
}

TEST_CASE("multinomial on the default generator and as a Tensor method", "[core][multinomial][fixture]") {
  const auto& c = fixture("sort.txt", "multinomial_default_generator");
  tg::manual_seed(static_cast<uint64_t>(c.scalar("seed")));
  const Tensor& w = c.at("weights");
  const Tensor first = w.multinomial(4);
  require_equal(first, int64_tensor(c.ints("indices"), {4}));
  require_equal(tg::multinomial(w, 10, true), int64_tensor(c.ints("indices_repl"), {10}));
  // A generator given by pointer is the Generator& overload.
  tg::Generator a(9), b(9);
  require_equal(tg::multinomial(w, 3, false, &a), tg::multinomial(w, 3, false, b));
}

TEST_CASE("multinomial: frequencies follow the weights, without replacement every category once",
          "[core][multinomial]") {
  tg::Generator gen(123);
  const std::vector<double> weights = {1, 0, 2, 3, 4};
  const double total = 10;
  const int64_t n = 200000;
  for (tg::DType dtype : {tg::kFloat32, tg::kFloat64}) {
    INFO(dtype);
    const Tensor w = tg::tensor(weights, {}, dtype);
    const std::vector<int64_t> with = tg::multinomial(w, n, true, gen).to_vector<int64_t>();
    // One sample at a time takes the exponential path: the same law.
    const std::vector<int64_t> one_each =
        tg::multinomial(w.reshape({1, 5}) * tg::ones({20000, 5}, dtype), 1, false, gen).to_vector<int64_t>();
    for (const auto* draws : {&with, &one_each}) {
      const double count = static_cast<double>(draws->size());
      for (int64_t c = 0; c < 5; ++c) {
        const double p = weights[c] / total;
        const double seen = static_cast<double>(std::count(draws->begin(), draws->end(), c));
        // Five standard deviations of a binomial count (exactly 0 for the zero weight).
        INFO("category " << c << ": " << seen << " of " << count);
        CHECK(std::fabs(seen - p * count) <= 5 * std::sqrt(count * p * (1 - p)));
      }
    }
    // Without replacement: every row a permutation of the positive categories first.
    const Tensor rows = tg::multinomial(w.reshape({1, 5}) * tg::ones({1000, 5}, dtype), 4, false, gen);
    const std::vector<int64_t> drawn = rows.to_vector<int64_t>();
    int64_t first_is_4 = 0;
    for (int64_t r = 0; r < 1000; ++r) {
      std::vector<int64_t> row(drawn.begin() + r * 4, drawn.begin() + r * 4 + 4);
      first_is_4 += row[0] == 4;
      std::sort(row.begin(), row.end());
      REQUIRE(row == std::vector<int64_t>{0, 2, 3, 4});
    }
    // P(first = 4) = 0.4 ± 5 σ of 1000 draws.
    CHECK(std::fabs(static_cast<double>(first_is_4) - 400.0) <= 5 * std::sqrt(1000 * 0.4 * 0.6));
  }
}

TEST_CASE("sort, topk and multinomial refuse bad input with tg::Error naming the values", "[core][sort][errors]") {
  const Tensor x = tg::tensor({1, 2, 3});
  REQUIRE_TG_ERROR(x.topk(4), Contains("topk") && Contains("k = 4") && Contains("[3]"));
  REQUIRE_TG_ERROR(x.topk(-1), Contains("k = -1"));
  REQUIRE_TG_ERROR(x.sort(1), Contains("sort"));
  REQUIRE_TG_ERROR(x.argsort(-2), Contains("argsort"));
  REQUIRE_TG_ERROR(tg::tensor({1, 0}, {}, tg::kBool).sort(), Contains("sort") && Contains("bool"));
  REQUIRE_TG_ERROR(Tensor().topk(1), Contains("topk"));

  REQUIRE_TG_ERROR(tg::multinomial(x, 0), Contains("num_samples > 0") && Contains("0"));
  REQUIRE_TG_ERROR(tg::multinomial(x, 4), Contains("num_samples = 4") && Contains("3 categories"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::tensor({1, -1}), 1), Contains("-1") && Contains("category 1"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::tensor({1, -1}), 2, true), Contains("-1"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::tensor({1, tg::testing::kNaN}), 2, true), Contains("nan"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::tensor({tg::testing::kInf, 1}), 1), Contains("inf"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::tensor({1, 1, 0, 0}, {2, 2}), 1), Contains("row 1") && Contains("sums to 0"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::ones({2, 2, 2}), 1), Contains("1-D or 2-D") && Contains("[2, 2, 2]"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::scalar_tensor(1), 1), Contains("1-D or 2-D"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::tensor({1, 2}, {}, tg::kInt64), 1), Contains("int64"));
  REQUIRE_TG_ERROR(tg::multinomial(tg::zeros({2, 0}), 1, true), Contains("sums to 0"));
  // An error leaves the generator untouched.
  tg::Generator gen(5);
  const tg::GeneratorState before = gen.get_state();
  REQUIRE_THROWS_AS(tg::multinomial(tg::tensor({1, 1, 0, 0}, {2, 2}), 3, true, gen), tg::Error);
  CHECK(gen.get_state() == before);
  // No rows: an empty result, nothing drawn.
  CHECK(tg::multinomial(tg::zeros({0, 3}), 2).shape() == tg::Shape{0, 2});
}
