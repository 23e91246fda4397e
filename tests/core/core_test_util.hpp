// Helpers shared by the core test files: tolerant comparison with a relative term, fresh leaves,
// and reading one fixture case as trainable leaves.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/fixtures.hpp"

namespace tg::testing {

// Tolerances for comparing against PyTorch's fixtures: float32 to ~1e-5, float64 to ~1e-12.
inline double fixture_tol(DType dtype) { return dtype == kFloat32 ? 1e-5 : 1e-12; }

// A fresh leaf with the values of `t` (fixture tensors are shared between tests: never mark them).
inline Tensor leaf(const Tensor& t, bool requires_grad = true) {
  Tensor copy = t.detach().clone();
  if (requires_grad) copy.requires_grad_();
  return copy;
}

// A random float64 leaf that requires grad, values in [low, high).
inline Tensor random_leaf(const Shape& shape, double low = -1.0, double high = 1.0) {
  Tensor t = empty(shape, kFloat64);
  t.uniform_(low, high);
  return t.requires_grad_();
}

}  // namespace tg::testing

// REQUIRE |actual - expected| <= atol + atol * |expected| elementwise (a relative term of the same
// size keeps the check meaningful for values far from 1), with shapes and dtypes equal.
#define TG_REQUIRE_NEAR(actual, expected, tol)                                                     \
  do {                                                                                             \
    const ::tg::Tensor tg_near_actual_ = (actual), tg_near_expected_ = (expected);                 \
    INFO("actual:   " << tg_near_actual_ << "\nexpected: " << tg_near_expected_ << "\nmax |diff| = " \
                      << ::tg::testing::max_abs_diff(tg_near_actual_, tg_near_expected_));         \
    REQUIRE(::tg::testing::allclose(tg_near_actual_, tg_near_expected_, (tol), (tol)));            \
  } while (false)
