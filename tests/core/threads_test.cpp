// Threads: set_num_threads round trip, and results bitwise identical at 1, 2, 3 and 8 threads for
// inputs large enough to be split into many chunks.
#include <cstring>

#include <tbb/task_arena.h>

#include "core_test_util.hpp"

using tg::Tensor;

TEST_CASE("set_num_threads / get_num_threads round trip", "[core][threads]") {
  const int original = tg::get_num_threads();
  CHECK(original >= 1);
  tg::set_num_threads(1);
  CHECK(tg::get_num_threads() == 1);
  tg::set_num_threads(2);
  CHECK(tg::get_num_threads() == 2);
  tg::set_num_threads(1);
  CHECK(tg::get_num_threads() == 1);
  tg::set_num_threads(8);  // more than this machine may have: still what the user asked for
  CHECK(tg::get_num_threads() == 8);
  tg::set_num_threads(original);
  CHECK(tg::get_num_threads() == original);
}

namespace {

const void* bytes_of(const Tensor& t) {
  return t.dtype() == tg::kFloat32 ? static_cast<const void*>(t.data<float>()) : t.data<double>();
}

// Runs `compute` inside an arena of each thread count and requires bitwise-equal results.
template <typename Compute>
void require_same_bits_at_any_thread_count(const Compute& compute) {
  std::vector<Tensor> reference;
  for (int threads : {1, 2, 3, 8}) {
    INFO(threads << " threads");
    std::vector<Tensor> results;
    tbb::task_arena arena(threads);
    arena.execute([&] { results = compute(); });
    if (reference.empty()) {
      reference = results;
      continue;
    }
    REQUIRE(results.size() == reference.size());
    for (size_t i = 0; i < results.size(); ++i) {
      INFO("result " << i);
      REQUIRE(results[i].shape() == reference[i].shape());
      REQUIRE(results[i].dtype() == reference[i].dtype());
      const size_t bytes = static_cast<size_t>(results[i].numel()) * tg::element_size(results[i].dtype());
      CHECK(std::memcmp(bytes_of(results[i]), bytes_of(reference[i]), bytes) == 0);
    }
  }
}

}  // namespace

TEST_CASE("threads: reductions are bitwise identical at any thread count", "[core][threads]") {
  tg::manual_seed(71);
  const Tensor big = tg::randn({1 << 22});
  const Tensor tall = tg::randn({4096, 300});
  const Tensor wide = tg::randn({2048, 5000});
  require_same_bits_at_any_thread_count([&] {
    return std::vector<Tensor>{big.sum(), tall.sum({0}), wide.mean({-1}), tall.var({0}), wide.sum({0})};
  });
}

TEST_CASE("threads: broadcast add is bitwise identical at any thread count", "[core][threads]") {
  tg::manual_seed(72);
  const Tensor a = tg::randn({2048, 1024}), b = tg::randn({1024});
  const Tensor c = tg::randn({2048, 1});
  require_same_bits_at_any_thread_count([&] { return std::vector<Tensor>{a + b, a * c, (a - b).exp()}; });
}

TEST_CASE("threads: matmul forward and backward are bitwise identical at any thread count", "[core][threads]") {
  tg::manual_seed(73);
  const Tensor a0 = tg::randn({512, 256}), b0 = tg::randn({256, 128});
  require_same_bits_at_any_thread_count([&] {
    Tensor a = a0.detach().clone().requires_grad_(), b = b0.detach().clone().requires_grad_();
    const Tensor y = tg::matmul(a, b);
    (y * y).sum().backward();
    return std::vector<Tensor>{y, a.grad(), b.grad()};
  });
}

TEST_CASE("threads: the big sum is right, not only reproducible", "[core][threads]") {
  const Tensor ones = tg::ones({1 << 22});
  CHECK(ones.sum().item() == static_cast<double>(1 << 22));
  CHECK(tg::full({4096, 300}, 0.5, tg::kFloat64).sum({0}).to_vector<double>() == std::vector<double>(300, 2048.0));
}
