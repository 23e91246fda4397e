// Helpers for the tests of the ops over one dim (softmax family, selection, joining, indexing):
// int64 fixture tensors rebuilt with their shape, and a run at several thread counts.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "support/fixtures.hpp"

namespace tg::testing {

// The int64 tensor `name` of a fixture case, shaped by its companion `<name>_shape`.
inline Tensor int64_tensor(const FixtureCase& c, const std::string& name) {
  const std::vector<int64_t>& flat = c.ints(name);
  const Shape shape = c.ints(name + "_shape");
  return tensor(std::vector<double>(flat.begin(), flat.end()), shape, kInt64);
}

// An int64 tensor of the given values and shape.
inline Tensor int64_values(const std::vector<int64_t>& values, const Shape& shape) {
  return tensor(std::vector<double>(values.begin(), values.end()), shape, kInt64);
}

// Runs compute() (returning tensors) at 1, 2, 3 and 8 threads and REQUIREs the same bits each time.
template <typename Compute>
void require_same_bits_at_any_thread_count(const Compute& compute) {
  std::vector<Tensor> reference;
  for (int threads : {1, 2, 3, 8}) {
    INFO(threads << " threads");
    tbb::global_control allow(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
    tbb::task_arena arena(threads);
    std::vector<Tensor> results;
    arena.execute([&] { results = compute(); });
    if (reference.empty()) {
      reference = results;
      continue;
    }
    REQUIRE(results.size() == reference.size());
    for (size_t i = 0; i < results.size(); ++i) {
      REQUIRE(results[i].shape() == reference[i].shape());
      REQUIRE(results[i].dtype() == reference[i].dtype());
      const size_t bytes = static_cast<size_t>(results[i].numel()) * element_size(results[i].dtype());
      const void* a = results[i].dtype() == kFloat32 ? static_cast<const void*>(results[i].data<float>())
                                                     : static_cast<const void*>(results[i].data<double>());
      const void* b = reference[i].dtype() == kFloat32 ? static_cast<const void*>(reference[i].data<float>())
                                                       : static_cast<const void*>(reference[i].data<double>());
      CHECK(std::memcmp(a, b, bytes) == 0);
    }
  }
}

}  // namespace tg::testing
