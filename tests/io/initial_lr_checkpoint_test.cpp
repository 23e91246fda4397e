// A checkpoint keeps each parameter group's initial_lr (PyTorch's param_groups entry), so that a
// scheduler rebuilt after loading starts from the run's initial lr, not from the lr it was at.
#include <catch2/catch.hpp>

#include "io_test_util.hpp"

using tg::io_test::scratch_path;

TEST_CASE("a checkpoint keeps each group's initial_lr", "[io][checkpoint][lr_scheduler]") {
  tg::nn::Linear head(3, 2);
  tg::optim::AdamW optimizer({head.weight}, {.lr = 0.01});
  optimizer.add_param_group({head.bias}, {.lr = 0.004});
  tg::optim::LinearLR warmup(optimizer, {.start_factor = 0.1, .total_iters = 4});
  warmup.step();
  const std::string path = scratch_path("initial_lr.safetensors");
  tg::save(head, optimizer, warmup, path);

  tg::nn::Linear restored_head(3, 2);
  tg::optim::AdamW restored({restored_head.weight}, {.lr = 0.5});
  restored.add_param_group({restored_head.bias}, {.lr = 0.5});
  tg::load(restored_head, restored, path);
  REQUIRE(restored.initial_lr(0) == 0.01);
  REQUIRE(restored.initial_lr(1) == 0.004);
  REQUIRE(restored.lr(1) == optimizer.lr(1));  // 0.004 * (0.1 + 0.9 / 4), the lr it was saved at
  // A scheduler built now starts from the initial lrs, as PyTorch's does on a loaded optimizer.
  tg::optim::ExponentialLR decay(restored, 0.5);
  REQUIRE(decay.base_lrs() == std::vector<double>{0.01, 0.004});
}
