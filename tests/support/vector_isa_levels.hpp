// Running a test's computation at every vector level this CPU supports (core/src/cpu/vector_isa.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "cpu/vector_isa.hpp"

namespace tg::testing {

// Calls run() once per level this CPU supports, with the kernels forced to that level, and
// returns {level name, result} per level. The level in force before is restored afterwards.
template <typename Run>
auto at_every_supported_level(const Run& run) {
  using detail::VectorIsa;
  struct Restore {
    VectorIsa saved = detail::vector_isa();
    ~Restore() { detail::set_vector_isa(saved); }
  } restore;
  std::vector<std::pair<std::string, decltype(run())>> results;
  for (VectorIsa isa : {VectorIsa::v2, VectorIsa::v3, VectorIsa::avx512}) {
    if (!detail::cpu_supports(isa)) continue;
    detail::set_vector_isa(isa);
    results.emplace_back(detail::name(isa), run());
  }
  REQUIRE(!results.empty());
  return results;
}

}  // namespace tg::testing
