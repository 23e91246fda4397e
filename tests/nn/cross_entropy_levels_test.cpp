// cross_entropy's float32 rows on core's per-level row kernels (nn/src/cross_entropy.cpp,
// core/src/ops/exp_row_kernels.cpp): bitwise the same at every vector level and thread count, and within
// float rounding of the float64 path.

#include <vector>

#include "nn_test_util.hpp"
#include "support/vector_isa_levels.hpp"

using tg::Tensor;
using namespace tg::nn_test;

TEST_CASE("float32 cross_entropy is bitwise the same at every vector level and thread count",
          "[loss][cross_entropy][vector_isa]") {
  // Class-index targets with and without weights, with and without smoothing (without, backward works from the
  // exponentials forward kept), some rows ignored, and probability targets; rows of tails only, of
  // blocks plus tails, and enough rows for several tasks.
  const bool probabilities = GENERATE(false, true);
  const double smoothing = GENERATE(0.0, 0.1);
  // Without weights, mean reduction: the loss takes one log per 16 rows (a log of their Σe product).
  const bool weighted = GENERATE(true, false);
  const auto [N, C] = GENERATE(std::array<int64_t, 2>{3, 5}, std::array<int64_t, 2>{17, 45},
                               std::array<int64_t, 2>{4096, 128});
  CAPTURE(probabilities, smoothing, weighted, N, C);
  tg::manual_seed(23);
  const Tensor logits = tg::randn({N, C}) * 3.0f;
  const Tensor target = probabilities ? tg::randn({N, C}).softmax(1) : tg::randint(0, C, {N});
  const tg::nn::CrossEntropyOptions options{
      .weight = weighted ? tg::rand({C}) + 0.5f : Tensor(), .ignore_index = probabilities ? -100 : 1, .label_smoothing = smoothing};
  const auto run = [&](tg::DType dtype) {
    Tensor x = leaf(logits.to(dtype));
    const Tensor w = weighted ? options.weight.to(dtype) : Tensor();
    const Tensor t = probabilities ? target.to(dtype) : target;
    const Tensor loss = tg::nn::cross_entropy(
        x, t, {.weight = w, .ignore_index = options.ignore_index, .label_smoothing = options.label_smoothing});
    loss.backward();
    return std::vector<Tensor>{loss.detach(), x.grad()};
  };
  const auto reference = run(tg::kFloat32);
  const auto as_bytes = [](const std::vector<Tensor>& tensors) {
    return std::vector{bytes(tensors[0]), bytes(tensors[1])};
  };
  tg::testing::require_same_at_every_level_and_thread_count([&] { return as_bytes(run(tg::kFloat32)); });
  const auto exact = run(tg::kFloat64);
  for (size_t k = 0; k < 2; ++k) CHECK(relative_error(reference[k].to(tg::kFloat64), exact[k]) <= 1e-6);
}
