// Checkpoints of modules with buffers: BatchNorm's running statistics and its int64 counter are
// saved under their state_dict names and restored, and a file without them is refused.
#include <catch2/catch.hpp>

#include "io_test_util.hpp"

using tg::io_test::scratch_path;

namespace {

tg::nn::Sequential conv_like_model() {
  return tg::nn::Sequential(tg::nn::Linear(3, 4), tg::nn::BatchNorm1d(4), tg::nn::ReLU(), tg::nn::Linear(4, 2));
}

}  // namespace

TEST_CASE("a checkpoint saves and restores buffers, the int64 counter included", "[io][checkpoint][buffers]") {
  tg::manual_seed(5);
  tg::nn::Sequential source = conv_like_model();
  for (int step = 0; step < 3; ++step) source(tg::randn({8, 3}) * 2 + 1);  // moves the running statistics
  const std::string path = scratch_path("buffers.safetensors");
  tg::save(source, path);

  tg::nn::Sequential target = conv_like_model();
  tg::load(target, path);
  const auto saved = source.state_dict(), loaded = target.state_dict();
  REQUIRE(loaded.keys() == saved.keys());
  for (const auto& [name, tensor] : saved) {
    INFO(name);
    REQUIRE(loaded.at(name).dtype() == tensor.dtype());
    REQUIRE(loaded.at(name).to(tg::kFloat64).to_vector<double>() == tensor.to(tg::kFloat64).to_vector<double>());
  }
  REQUIRE(loaded.at("1.num_batches_tracked").item<int64_t>() == 3);
  source.eval();
  target.eval();
  const tg::Tensor x = tg::randn({5, 3});
  REQUIRE(target(x).to_vector<float>() == source(x).to_vector<float>());

  // A model without the buffers (a plain MLP's file) does not load into one that has them.
  tg::nn::Sequential no_buffers(tg::nn::Linear(3, 4), tg::nn::BatchNorm1d(4, {.track_running_stats = false}),
                                tg::nn::ReLU(), tg::nn::Linear(4, 2));
  const std::string plain_path = scratch_path("no_buffers.safetensors");
  tg::save(no_buffers, plain_path);
  REQUIRE_THROWS_WITH(tg::load(target, plain_path), Catch::Contains("no tensor for the buffer '1.running_mean'"));
  REQUIRE_THROWS_WITH(tg::load(no_buffers, path), Catch::Contains("1.running_mean") && Catch::Contains("no parameter"));
}
