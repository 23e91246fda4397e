// Loading the PyTorch reference fixtures in tests/fixtures (written by make_fixtures.py) and
// comparing tensors against them.
#pragma once

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

}  // namespace tg::testing

// REQUIRE that two tensors are close, printing both and the largest difference when they are not.
#define TG_REQUIRE_CLOSE(actual, expected, atol)                                         \
  do {                                                                                   \
    const ::tg::Tensor tg_actual_ = (actual), tg_expected_ = (expected);                 \
    INFO("actual:   " << tg_actual_ << "\nexpected: " << tg_expected_                    \
                      << "\nmax |diff| = " << ::tg::testing::max_abs_diff(tg_actual_, tg_expected_)); \
    REQUIRE(::tg::testing::allclose(tg_actual_, tg_expected_, (atol)));                  \
  } while (false)
