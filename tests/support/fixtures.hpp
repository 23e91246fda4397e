// Loading the PyTorch reference fixtures in tests/fixtures (written by make_fixtures.py) and
// comparing tensors against them.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

namespace tg::testing {

// One named case of a fixture file: float tensors by name, and int64 tensors (class targets,
// dims, shapes) as plain vectors.
struct FixtureCase {
  std::string name;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::vector<int64_t>> integers;

  bool has(const std::string& tensor_name) const;
  const Tensor& at(const std::string& tensor_name) const;              // float32/float64 tensors
  const std::vector<int64_t>& ints(const std::string& tensor_name) const;  // int64 tensors
  double scalar(const std::string& tensor_name) const;                 // a 0-d parameter
};

// All cases of tests/fixtures/<file>, by case name. Throws std::runtime_error on a parse error.
const std::map<std::string, FixtureCase>& load_fixtures(const std::string& file);
const FixtureCase& fixture(const std::string& file, const std::string& case_name);

// max |actual - expected|, after checking that shapes match (returns +inf when they do not).
double max_abs_diff(const Tensor& actual, const Tensor& expected);

// True when every element satisfies |actual - expected| <= atol + rtol * |expected| and shapes
// and dtypes agree.
bool allclose(const Tensor& actual, const Tensor& expected, double atol, double rtol = 0.0);

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// The values of any tensor as doubles, row-major.
inline std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

// CHECK that `actual` holds `expected` the IEEE way: NaN where NaN is expected, the same infinity
// where an infinity is expected, and finite values within tol · (1 + |expected|).
inline void require_ieee_equal(const Tensor& actual, const std::vector<double>& expected, double tol) {
  REQUIRE(actual.defined());
  const std::vector<double> got = values(actual);
  INFO("actual: " << actual);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", expected " << expected[i]);
    if (std::isnan(expected[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(expected[i])) {
      CHECK(got[i] == expected[i]);
    } else {
      CHECK(std::isfinite(got[i]));
      CHECK(std::fabs(got[i] - expected[i]) <= tol * (1.0 + std::fabs(expected[i])));
    }
  }
}

}  // namespace tg::testing

// REQUIRE that two tensors are close, printing both and the largest difference when they are not.
#define TG_REQUIRE_CLOSE(actual, expected, atol)                                         \
  do {                                                                                   \
    const ::tg::Tensor tg_actual_ = (actual), tg_expected_ = (expected);                 \
    INFO("actual:   " << tg_actual_ << "\nexpected: " << tg_expected_                    \
                      << "\nmax |diff| = " << ::tg::testing::max_abs_diff(tg_actual_, tg_expected_)); \
    REQUIRE(::tg::testing::allclose(tg_actual_, tg_expected_, (atol)));                  \
  } while (false)

// REQUIRE that gradcheck passes, printing its summary when it does not.
#define TG_REQUIRE_GRADCHECK(fn, inputs)                                  \
  do {                                                                    \
    const ::tg::GradcheckResult tg_result_ = ::tg::gradcheck((fn), (inputs)); \
    INFO(tg_result_.message);                                             \
    REQUIRE(tg_result_.passed);                                           \
  } while (false)

// REQUIRE that `expression` throws tg::Error with a message matching `message_matcher` (Catch2 v2
// matches messages only through REQUIRE_THROWS_WITH, which accepts any exception type).
#define REQUIRE_TG_ERROR(expression, message_matcher) \
  do {                                                \
    REQUIRE_THROWS_AS(expression, tg::Error);         \
    REQUIRE_THROWS_WITH(expression, message_matcher); \
  } while (false)
