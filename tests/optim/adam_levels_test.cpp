// Adam's and AdamW's update on optim's per-level kernels (optim/src/adam_kernels.cpp): bitwise the
// same at every vector level and thread count, for every combination of the options that change
// which operations run; the PyTorch trajectories themselves are in adaptive_optimizers_test.cpp.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "optim_test_util.hpp"
#include "support/vector_isa_levels.hpp"

namespace {

std::string bytes_of(const tg::Tensor& t) {
  const size_t size = static_cast<size_t>(t.numel()) * (t.dtype() == tg::kFloat32 ? sizeof(float) : sizeof(double));
  std::string bytes(size, '\0');
  if (t.dtype() == tg::kFloat32) std::memcpy(bytes.data(), t.data<float>(), size);
  else std::memcpy(bytes.data(), t.data<double>(), size);
  return bytes;
}

// Three steps of `Optimizer` on a parameter of `numel` elements (several parallel chunks and a
// tail shorter than any vector): the parameter's and every state's bytes.
template <typename Optimizer, typename Options>
std::vector<std::string> three_steps(tg::DType dtype, int64_t numel, const Options& options) {
  tg::Generator generator(7);
  tg::Tensor param = tg::randn({numel}, dtype, &generator);
  param.requires_grad_();
  Optimizer optimizer({param}, options);
  for (int step = 0; step < 3; ++step) {
    param.set_grad(tg::randn({numel}, dtype, &generator));
    optimizer.step();
  }
  std::vector<std::string> result{bytes_of(param)};
  for (const auto& [name, state] : optimizer.state(0)) result.push_back(bytes_of(state));
  return result;
}

}  // namespace

TEST_CASE("Adam and AdamW are bitwise the same at every vector level and thread count",
          "[optim][adam][vector_isa]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const int64_t numel = GENERATE(int64_t{13}, int64_t{100003});
  const bool amsgrad = GENERATE(false, true);
  const bool maximize = GENERATE(false, true);
  CAPTURE(dtype, numel, amsgrad, maximize);
  tg::testing::require_same_at_every_level_and_thread_count([&] {
    return three_steps<tg::optim::AdamW>(
        dtype, numel, tg::optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = amsgrad, .maximize = maximize});
  });
  tg::testing::require_same_at_every_level_and_thread_count([&] {  // Adam's L2 penalty
    return three_steps<tg::optim::Adam>(
        dtype, numel, tg::optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.1, .amsgrad = amsgrad, .maximize = maximize});
  });
}
