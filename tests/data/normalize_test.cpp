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
