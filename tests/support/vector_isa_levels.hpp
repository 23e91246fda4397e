// Running a test's computation at every vector level this CPU supports (core/src/cpu/vector_isa.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <tbb/task_arena.h>

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

// Requires run() to give the same result (operator==) at every level this CPU supports and at 1 and
// 3 threads as at the default level and thread count: the per-level kernels' promise of bitwise
// equal results. run() returns bytes or exact values, never a tolerance.
template <typename Run>
void require_same_at_every_level_and_thread_count(const Run& run) {
  const auto reference = run();
  for (const auto& [level, result] : at_every_supported_level(run)) {
    CAPTURE(level);
    REQUIRE(result == reference);
  }
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    decltype(run()) result;
    tbb::task_arena(threads).execute([&] { result = run(); });
    REQUIRE(result == reference);
  }
}

}  // namespace tg::testing
