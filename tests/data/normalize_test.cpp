// moments and normalize_: values by hand, against a serial long-double reference and the
// out-of-place ops they replace, the same bits at every thread count, and their errors.
#include <cmath>

#include "data_test_util.hpp"
#include "support/tensor_equal.hpp"

using namespace tg;

namespace {

// Σ and Σ (x - mean)² in long double, one element after another: an independent reference.
data::Moments serial_moments(const std::vector<double>& values) {
  long double sum = 0;
  for (const double v : values) sum += v;
  const long double mean = sum / static_cast<long double>(values.size());
  long double squares = 0;
  for (const double v : values) squares += (v - mean) * (v - mean);
  return {static_cast<double>(mean), static_cast<double>(std::sqrt(squares / (values.size() - 1)))};
}

}  // namespace

TEST_CASE("moments gives the mean and the unbiased std, by hand", "[data][normalize]") {
  const DType dtype = GENERATE(kFloat32, kFloat64);
  const data::Moments m = data::moments(tensor({1, 2, 3, 4}, {2, 2}, dtype));
  REQUIRE(m.mean == 2.5);
  // Σ (x - 2.5)² = 5, over n - 1 = 3.
  REQUIRE(m.stddev == std::sqrt(5.0 / 3.0));
  // As torch's: the std of one element is NaN, and the mean and std of none too.
  const data::Moments one = data::moments(tensor({7}, {1}, dtype));
  REQUIRE(one.mean == 7);
  REQUIRE(std::isnan(one.stddev));
  const data::Moments none = data::moments(zeros({0, 3}, dtype));
  REQUIRE(std::isnan(none.mean));
  REQUIRE(std::isnan(none.stddev));
}

TEST_CASE("moments of a large tensor match a serial long-double sum, at every thread count",
          "[data][normalize]") {
  // Pixel-like values 0 ... 255 around a large mean: many chunks, and a sum that float would round.
  Generator generator(0);
  const int64_t n = 1000003;  // not a multiple of the chunk
  std::vector<double> pixels = rand({n}, kFloat64, &generator).to_vector<double>();
  for (double& pixel : pixels) pixel = std::floor(pixel * 256);
  const Tensor x = tensor(pixels, {n}, kFloat32);
  const data::Moments expected = serial_moments(pixels);
  const int threads_before = get_num_threads();
  std::vector<data::Moments> results;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    results.push_back(data::moments(x));
  }
  set_num_threads(threads_before);
  REQUIRE_THAT(results[0].mean, Catch::Matchers::WithinRel(expected.mean, 1e-13));
  REQUIRE_THAT(results[0].stddev, Catch::Matchers::WithinRel(expected.stddev, 1e-13));
  for (const data::Moments& m : results) {
    REQUIRE(m.mean == results[0].mean);  // bitwise: the chunks depend on n alone
    REQUIRE(m.stddev == results[0].stddev);
  }
  // And torch's definitions as tapegrad's own reductions compute them, in float64.
  REQUIRE_THAT(results[0].mean, Catch::Matchers::WithinRel(x.to(kFloat64).mean().item(), 1e-12));
  REQUIRE_THAT(results[0].stddev, Catch::Matchers::WithinRel(x.to(kFloat64).std().item(), 1e-12));
}

TEST_CASE("normalize_ writes (x - mean) / std over x, as the out-of-place ops would", "[data][normalize]") {
  const DType dtype = GENERATE(kFloat32, kFloat64);
  Generator generator(1);
  Tensor x = rand({300, 700}, dtype, &generator) * 255.0;  // several chunks
  const Tensor original = x.clone();
  const Tensor expected = (original - 72.94) / 90.02;  // the scalars rounded to x's dtype, as here
  const Tensor& returned = data::normalize_(x, 72.94, 90.02);
  REQUIRE(returned.is_same(x));
  REQUIRE(x.dtype() == dtype);
  REQUIRE(x.shape() == Shape{300, 700});
  TG_REQUIRE_EQUAL(x, expected);
  // By hand.
  Tensor small = tensor({1, 2, 3, 4}, {4}, dtype);
  data::normalize_(small, 2.5, 0.5);
  REQUIRE(small.to(kFloat64).to_vector<double>() == std::vector<double>{-3, -1, 1, 3});
}

TEST_CASE("moments and normalize_ refuse what they cannot standardise", "[data][normalize][errors]") {
  REQUIRE_TG_ERROR(data::moments(Tensor()), Catch::Contains("moments") && Catch::Contains("undefined"));
  REQUIRE_TG_ERROR(data::moments(zeros({2}, kInt64)), Catch::Contains("moments") && Catch::Contains("int64"));
  Tensor undefined;
  REQUIRE_TG_ERROR(data::normalize_(undefined, 0, 1), Catch::Contains("normalize_") && Catch::Contains("undefined"));
  Tensor integers = zeros({2}, kInt64);
  REQUIRE_TG_ERROR(data::normalize_(integers, 0, 1), Catch::Contains("normalize_") && Catch::Contains("int64"));
  Tensor x = ones({2, 3});
  REQUIRE_TG_ERROR(data::normalize_(x, 0, 0), Catch::Contains("normalize_") && Catch::Contains("is 0 in float32"));
  // 1e-50 is a double, but 0 in float32.
  REQUIRE_TG_ERROR(data::normalize_(x, 0, 1e-50), Catch::Contains("is 0 in float32"));
  REQUIRE_TG_ERROR(data::normalize_(x, NAN, 1), Catch::Contains("expected a finite mean, got nan"));
  REQUIRE_TG_ERROR(data::normalize_(x, 0, INFINITY), Catch::Contains("expected a finite stddev, got inf"));
  REQUIRE_TG_ERROR(data::normalize_(x, 1e300, 1), Catch::Contains("overflows float32"));
  REQUIRE(x.to_vector<float>() == std::vector<float>(6, 1.0f));  // every refusal left x as it was
  Tensor weight = ones({2}).requires_grad_();
  REQUIRE_TG_ERROR(data::normalize_(weight, 0, 2), Catch::Contains("requires grad") && Catch::Contains("[2]"));
  {
    NoGradGuard no_grad;
    data::normalize_(weight, 0, 2);
  }
  REQUIRE(weight.to_vector<float>() == std::vector<float>{0.5f, 0.5f});
}

// --- per feature: moments(x, dims) and normalize_(x, mean, stddev) -----------------------------

namespace {

std::vector<double> values_of(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

// "[4, 3, 5]" for a test's INFO.
std::string text_of(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

}  // namespace

TEST_CASE("moments along dims gives each column's and each row's mean and std, by hand", "[data][normalize]") {
  const DType dtype = GENERATE(kFloat32, kFloat64);
  // Columns {1, 3, 5} and {2, 6, 10}: means 3 and 6, Σ (x - mean)² = 8 and 32.
  const Tensor table = tensor({1, 2, 3, 6, 5, 10}, {3, 2}, dtype);
  const data::TensorMoments columns = data::moments(table, {0});
  REQUIRE(columns.mean.dtype() == dtype);
  REQUIRE(columns.mean.shape() == Shape{2});
  REQUIRE(columns.stddev.shape() == Shape{2});
  REQUIRE(values_of(columns.mean) == std::vector<double>{3, 6});
  REQUIRE(values_of(columns.stddev) == std::vector<double>{2, 4});  // √(8/2), √(32/2)
  // correction 0: the population std (scikit-learn's StandardScaler), √(8/3) and √(32/3).
  const data::TensorMoments population = data::moments(table, {0}, 0);
  REQUIRE(values_of(population.stddev) == values_of(tensor({std::sqrt(8.0 / 3), std::sqrt(32.0 / 3)}, {2}, dtype)));
  // Rows {1, 2}, {3, 6}, {5, 10}: means 1.5, 4.5, 7.5; Σ (x - mean)² = 0.5, 4.5, 12.5 over 2 - 1.
  const data::TensorMoments rows = data::moments(table, {-1}, 1, /*keepdim=*/true);
  REQUIRE(rows.mean.shape() == Shape{3, 1});
  REQUIRE(values_of(rows.mean) == std::vector<double>{1.5, 4.5, 7.5});
  REQUIRE(values_of(rows.stddev) == values_of(tensor({std::sqrt(0.5), std::sqrt(4.5), std::sqrt(12.5)}, {3, 1}, dtype)));
  // No dims: all six elements, mean 4.5 and Σ (x - 4.5)² = 53.5 over 5; keepdim gives [1, 1].
  const data::TensorMoments all = data::moments(table, {}, 1, true);
  REQUIRE(all.mean.shape() == Shape{1, 1});
  REQUIRE(values_of(all.mean) == std::vector<double>{4.5});
  REQUIRE(values_of(all.stddev) == values_of(tensor({std::sqrt(53.5 / 5)}, {1, 1}, dtype)));
}

TEST_CASE("moments per channel reduces dims that are not adjacent, by hand", "[data][normalize]") {
  // [N = 2, C = 2, H = 1, W = 2]: channel 0 holds 1, 3, 5, 7 (mean 4, Σ (x - 4)² = 20), channel 1
  // holds 10, 10, 10, 14 (mean 11, Σ (x - 11)² = 12).
  const Tensor images = tensor({1, 3, 10, 10, 5, 7, 10, 14}, {2, 2, 1, 2}, kFloat64);
  const data::TensorMoments channels = data::moments(images, {0, 2, 3}, 1, /*keepdim=*/true);
  REQUIRE(channels.mean.shape() == Shape{1, 2, 1, 1});
  REQUIRE(values_of(channels.mean) == std::vector<double>{4, 11});
  REQUIRE(values_of(channels.stddev) == std::vector<double>{std::sqrt(20.0 / 3), 2});
  // The same dims listed in another order, or counted from the end, are the same reduction.
  const data::TensorMoments again = data::moments(images, {3, -4, 2});
  REQUIRE(again.mean.shape() == Shape{2});
  REQUIRE(values_of(again.stddev) == values_of(channels.stddev));
}

TEST_CASE("moments along dims matches float64 mean and std over every kind of dims, at every thread count",
          "[data][normalize]") {
  // Column blocks of 256 (600 = 2 full and a partial one), non-adjacent dims, size-1 dims, a
  // reduction down to one result, and values around a large mean (cancellation in E[x²] - E[x]²).
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const Case c = GENERATE(Case{{500, 600}, {0}}, Case{{600, 300}, {1}}, Case{{4, 3, 5, 6}, {0, 2, 3}},
                          Case{{4, 1, 5, 6}, {0, 3}}, Case{{7, 3, 300}, {1}}, Case{{3, 4, 5}, {0, 1, 2}},
                          Case{{2, 3, 4}, {0, 2}}, Case{{70000}, {0}});
  const double correction = GENERATE(1.0, 0.0);
  const DType dtype = GENERATE(kFloat32, kFloat64);
  INFO("shape " << text_of(c.shape) << ", dims " << text_of(c.dims) << ", correction " << correction << ", " << dtype);
  Generator generator(7);
  const Tensor x = (rand(c.shape, kFloat64, &generator) * 10.0 + 1000.0).to(dtype);
  // The float64 reference: tapegrad's own reductions, two passes.
  const Tensor wide = x.to(kFloat64);
  const std::vector<double> expected_mean = values_of(wide.mean(c.dims));
  const std::vector<double> expected_std = values_of(wide.std(c.dims, correction));
  const int threads_before = get_num_threads();
  std::vector<data::TensorMoments> results;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    results.push_back(data::moments(x, c.dims, correction));
  }
  set_num_threads(threads_before);
  const std::vector<double> mean = values_of(results[0].mean), stddev = values_of(results[0].stddev);
  REQUIRE(results[0].mean.shape() == wide.mean(c.dims).shape());
  REQUIRE(mean.size() == expected_mean.size());
  // Computed in double, then rounded once to x's dtype.
  const double tolerance = dtype == kFloat32 ? 1.2e-7 : 1e-11;
  for (size_t i = 0; i < mean.size(); ++i) {
    REQUIRE_THAT(mean[i], Catch::Matchers::WithinRel(expected_mean[i], tolerance));
    REQUIRE_THAT(stddev[i], Catch::Matchers::WithinRel(expected_std[i], dtype == kFloat32 ? tolerance : 1e-10));
  }
  for (const data::TensorMoments& m : results) {
    TG_REQUIRE_EQUAL(m.mean, results[0].mean);  // bitwise: each result is summed by one task in one order
    TG_REQUIRE_EQUAL(m.stddev, results[0].stddev);
  }
}

TEST_CASE("moments along dims of no elements, one element and a 0-d tensor, as torch's", "[data][normalize]") {
  // No rows: every column's mean and std are NaN (0 / 0).
  const data::TensorMoments none = data::moments(zeros({0, 3}), {0});
  REQUIRE(none.mean.shape() == Shape{3});
  for (const double v : values_of(none.mean)) REQUIRE(std::isnan(v));
  for (const double v : values_of(none.stddev)) REQUIRE(std::isnan(v));
  // No columns: no results.
  REQUIRE(data::moments(zeros({4, 0}), {0}).mean.shape() == Shape{0});
  // One row: the unbiased std is NaN, the population std 0.
  const Tensor one_row = tensor({2, 5}, {1, 2});
  REQUIRE(values_of(data::moments(one_row, {0}).mean) == std::vector<double>{2, 5});
  for (const double v : values_of(data::moments(one_row, {0}).stddev)) REQUIRE(std::isnan(v));
  REQUIRE(values_of(data::moments(one_row, {0}, 0).stddev) == std::vector<double>{0, 0});
  // A 0-d tensor reduces over dim 0 (or -1) to itself.
  const data::TensorMoments scalar = data::moments(tensor({3}, {}).reshape({}), {0}, 0);
  REQUIRE(scalar.mean.shape() == Shape{});
  REQUIRE(scalar.mean.item() == 3);
  REQUIRE(scalar.stddev.item() == 0);
}

TEST_CASE("normalize_ with per-column moments standardises a training and a test split", "[data][normalize]") {
  const DType dtype = GENERATE(kFloat32, kFloat64);
  Tensor train = tensor({1, 2, 3, 6, 5, 10}, {3, 2}, dtype);
  Tensor test = tensor({7, 2, 3, 14}, {2, 2}, dtype);
  const data::TensorMoments columns = data::moments(train, {0});  // means 3, 6; stds 2, 4
  const Tensor& returned = data::normalize_(train, columns.mean, columns.stddev);
  REQUIRE(returned.is_same(train));
  REQUIRE(values_of(train) == std::vector<double>{-1, -1, 0, 0, 1, 1});
  // The test split with the training split's moments: (7 - 3) / 2, (2 - 6) / 4, (3 - 3) / 2, (14 - 6) / 4.
  data::normalize_(test, columns.mean, columns.stddev);
  REQUIRE(values_of(test) == std::vector<double>{2, -1, 0, 2});
  // And after it the training split has mean 0 and std 1 in every column.
  const data::TensorMoments after = data::moments(train, {0});
  REQUIRE(values_of(after.mean) == std::vector<double>{0, 0});
  REQUIRE(values_of(after.stddev) == std::vector<double>{1, 1});
}

TEST_CASE("normalize_ with broadcast moments writes what the out-of-place ops would", "[data][normalize]") {
  const DType dtype = GENERATE(kFloat32, kFloat64);
  Generator generator(3);
  // Per channel of images ([1, C, 1, 1]), per column ([F], float64 moments into a float32 x too),
  // per row ([N, 1]), and a mean of one shape with a stddev of another.
  struct Case {
    Shape shape;
    Shape mean_shape;
    Shape stddev_shape;
  };
  const Case c = GENERATE(Case{{4, 3, 5, 70}, {1, 3, 1, 1}, {1, 3, 1, 1}}, Case{{300, 200}, {200}, {200}},
                          Case{{300, 200}, {300, 1}, {300, 1}}, Case{{300, 200}, {1, 200}, {}},
                          Case{{5}, {5}, {1}});
  INFO("shape " << text_of(c.shape) << ", mean " << text_of(c.mean_shape) << ", stddev " << text_of(c.stddev_shape));
  Tensor x = rand(c.shape, dtype, &generator) * 255.0;
  const Tensor mean = rand(c.mean_shape, kFloat64, &generator) * 100.0;
  const Tensor stddev = rand(c.stddev_shape, kFloat64, &generator) + 0.5;
  // Rounded to x's dtype first, then subtracted and divided in it.
  const Tensor expected = (x - mean.to(dtype)) / stddev.to(dtype);
  data::normalize_(x, mean, stddev);
  REQUIRE(x.dtype() == dtype);
  TG_REQUIRE_EQUAL(x, expected);
}

TEST_CASE("normalize_ with tensors refuses shapes that do not broadcast, zero or non-finite entries",
          "[data][normalize][errors]") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor before = x.clone();
  REQUIRE_TG_ERROR(data::normalize_(x, zeros({3}), ones({2})),
                   Catch::Contains("normalize_") && Catch::Contains("a mean of shape [3] does not broadcast to x's shape [3, 2]"));
  REQUIRE_TG_ERROR(data::normalize_(x, zeros({2}), ones({1, 3, 2})), Catch::Contains("a stddev of shape [1, 3, 2]"));
  REQUIRE_TG_ERROR(data::normalize_(x, zeros({2}), tensor({1, 0}, {2})),
                   Catch::Contains("the stddev at [1] is 0, 0 in float32") && Catch::Contains("constant feature"));
  // 1e-50 is a double, but 0 in float32.
  REQUIRE_TG_ERROR(data::normalize_(x, zeros({2}), tensor({1e-50, 1}, {2}, kFloat64)), Catch::Contains("at [0] is 1e-50"));
  REQUIRE_TG_ERROR(data::normalize_(x, tensor({0, NAN}, {1, 2}), ones({2})),
                   Catch::Contains("the mean at [0, 1] is nan, not finite in float32"));
  REQUIRE_TG_ERROR(data::normalize_(x, tensor({1e300, 0}, {2}, kFloat64), ones({2})), Catch::Contains("not finite in float32"));
  REQUIRE_TG_ERROR(data::normalize_(x, Tensor(), ones({2})), Catch::Contains("the mean is an undefined tensor"));
  REQUIRE_TG_ERROR(data::normalize_(x, zeros({2}, kInt64), ones({2})), Catch::Contains("normalize_") && Catch::Contains("int64"));
  TG_REQUIRE_EQUAL(x, before);  // every refusal left x as it was
  Tensor weight = ones({2}).requires_grad_();
  REQUIRE_TG_ERROR(data::normalize_(weight, zeros({2}), ones({2})), Catch::Contains("requires grad"));
}

TEST_CASE("moments along dims refuses bad dims and a NaN correction", "[data][normalize][errors]") {
  const Tensor x = ones({2, 3});
  REQUIRE_TG_ERROR(data::moments(x, {2}), Catch::Contains("moments"));
  REQUIRE_TG_ERROR(data::moments(x, {0, -2}), Catch::Contains("moments") && Catch::Contains("more than once"));
  REQUIRE_TG_ERROR(data::moments(x, {0}, NAN), Catch::Contains("correction must be a number, got NaN"));
  REQUIRE_TG_ERROR(data::moments(zeros({2}, kInt64), {0}), Catch::Contains("moments") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(data::moments(Tensor(), {0}), Catch::Contains("moments") && Catch::Contains("undefined"));
}
