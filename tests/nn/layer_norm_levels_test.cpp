// LayerNorm's row kernels at every vector level the CPU has: each within float rounding of a
// float64 reference, and all levels bitwise identical (docs/performance.md, "One build for every
// x86-64 CPU").
#include <cstring>
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "support/vector_isa_levels.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("layer_norm at every vector level matches a float64 reference and the other levels bit for bit",
          "[layer_norm][vector_isa]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  // Rows of tails only (3, 7), of vectors plus every tail piece (64 + 16 + 8 + 4 + 3
  // floats), wide rows, and an output of 16 MiB and more (streaming stores).
  const Shape shape = GENERATE(Shape{5, 3}, Shape{9, 7}, Shape{33, 95}, Shape{4, 4096}, Shape{4096, 1024});
  CAPTURE(dtype, shape);
  tg::manual_seed(43);
  const int64_t N = shape[1];
  const Tensor x_values = tg::randn(shape, dtype) * 2.0 + 3.0, dy = tg::randn(shape, dtype);
  const Tensor w_values = tg::randn({N}, dtype), b_values = tg::randn({N}, dtype);
  auto run = [&](tg::DType as) {
    Tensor x = leaf(x_values.to(as)), w = leaf(w_values.to(as)), b = leaf(b_values.to(as));
    Tensor y = F::layer_norm(x, {N}, w, b, 1e-5);
    y.backward(dy.to(as));
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto reference = run(tg::kFloat64);  // at the default level; float64 rounding is far below the bound
  const auto per_level = tg::testing::at_every_supported_level([&] { return run(dtype); });
  const char* names[] = {"y", "dx", "dγ", "dβ"};
  const double tolerance = dtype == tg::kFloat32 ? 1e-5 : 1e-12;
  for (const auto& [level, results] : per_level) {
    CAPTURE(level);
    for (size_t i = 0; i < results.size(); ++i) {
      INFO(names[i] << ": relative error " << relative_error(results[i], reference[i]));
      REQUIRE(relative_error(results[i], reference[i]) <= tolerance);
      REQUIRE(bytes(results[i]) == bytes(per_level.front().second[i]));
    }
  }
}
