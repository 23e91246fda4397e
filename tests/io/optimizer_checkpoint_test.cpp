// Checkpoints of optimizers with parameter groups and of schedulers, through their state dicts:
// resuming bit for bit, and refusing (with nothing changed) state that does not fit.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "io_test_util.hpp"

using tg::io_test::fixture_path;
using tg::io_test::scratch_path;

namespace {

// Two parameter groups with different options (the body and the head of an MLP) and a StepLR
// over both, on a fixed stream of mini-batches so that two runs see the same data.
struct GroupedTraining {
  tg::nn::Sequential model{tg::nn::Linear(2, 32), tg::nn::ReLU(), tg::nn::LayerNorm({32}), tg::nn::Linear(32, 3)};
  tg::optim::SGD optimizer{body(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4}};
  tg::optim::StepLR scheduler = make_scheduler();

  std::vector<tg::Tensor> body() {
    std::vector<tg::Tensor> params = model.parameters();
    params.resize(4);  // 0.weight, 0.bias, 2.weight, 2.bias
    return params;
  }
  tg::optim::StepLR make_scheduler() {
    optimizer.add_param_group({model.at<tg::nn::Linear>(3).weight, model.at<tg::nn::Linear>(3).bias},
                              {.lr = 0.05, .momentum = 0.5, .dampening = 0.1});
    return tg::optim::StepLR(optimizer, 3, 0.5);
  }

  // Epochs [from, to) of two steps each, then scheduler.step().
  void run(int from, int to) {
    for (int epoch = from; epoch < to; ++epoch) {
      for (int step = 0; step < 2; ++step) {
        tg::manual_seed(1000 + static_cast<uint64_t>(2 * epoch + step));
        const tg::Tensor x = tg::randn({16, 2});
        std::vector<int64_t> labels(16);
        for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>((i * 5 + step) % 3);
        optimizer.zero_grad();
        tg::Tensor loss = tg::nn::cross_entropy(model(x), labels);
        loss.backward();
        optimizer.step();
      }
      scheduler.step();
    }
  }
};

// Everything a load could change, as bytes and numbers.
std::string state_of(GroupedTraining& t) {
  std::string state;
  const auto append = [&state](const tg::Tensor& tensor) {
    state.append(reinterpret_cast<const char*>(tensor.data<float>()), static_cast<size_t>(tensor.numel()) * sizeof(float));
  };
  for (const tg::Tensor& p : t.model.parameters()) append(p);
  for (const tg::Tensor& buffer : t.optimizer.momentum_buffers())
    if (buffer.defined()) append(buffer);
  // (concat, not "/" + std::to_string: GCC 12 reports a false -Wrestrict on that at -O3)
  for (size_t group = 0; group < t.optimizer.param_group_count(); ++group)
    state += tg::detail::concat("/", t.optimizer.lr(group), "/", t.optimizer.options(group).momentum);
  state += tg::detail::concat("/", t.optimizer.step_count(), "/", t.scheduler.last_epoch());
  return state;
}

}  // namespace

TEST_CASE("model, grouped optimizer and scheduler resume from a checkpoint bit for bit", "[io][checkpoint][optim]") {
  tg::manual_seed(7);
  GroupedTraining uninterrupted;
  tg::manual_seed(7);
  GroupedTraining first_half;
  uninterrupted.run(0, 8);
  first_half.run(0, 4);
  const std::string path = scratch_path("grouped.safetensors");
  tg::save(first_half.model, first_half.optimizer, first_half.scheduler, path);

  tg::manual_seed(99);  // another initialisation, lr and schedule position, all overwritten by the load
  GroupedTraining resumed;
  resumed.run(0, 1);
  tg::load(resumed.model, resumed.optimizer, resumed.scheduler, path);
  REQUIRE(resumed.scheduler.last_epoch() == 4);
  REQUIRE(resumed.optimizer.step_count() == 8);
  REQUIRE(resumed.optimizer.lr(1) == 0.05 * 0.5);  // epoch 4 of StepLR(3, 0.5) from 0.05
  resumed.run(4, 8);
  REQUIRE(state_of(resumed) == state_of(uninterrupted));

  // The same file loads as a model alone, and as a model with its optimizer.
  GroupedTraining partial;
  tg::load(partial.model, path);
  tg::load(partial.model, partial.optimizer, path);
  REQUIRE(partial.optimizer.step_count() == 8);
  REQUIRE(partial.scheduler.last_epoch() == 0);
}

TEST_CASE("a checkpoint whose optimizer or scheduler does not fit is refused, and nothing changes",
          "[io][checkpoint][optim][errors]") {
  tg::manual_seed(8);
  GroupedTraining source;
  source.run(0, 2);
  const std::string path = scratch_path("grouped_source.safetensors");
  tg::save(source.model, source.optimizer, source.scheduler, path);
  const std::string without_scheduler = scratch_path("grouped_no_scheduler.safetensors");
  tg::save(source.model, source.optimizer, without_scheduler);

  tg::manual_seed(9);
  GroupedTraining target;
  target.run(0, 1);
  const std::string before = state_of(target);
  const auto refuses = [&](auto load, const std::string& reason) {
    INFO("expected reason: " << reason);
    REQUIRE_TG_ERROR(load(), Catch::Contains("load") && Catch::Contains(reason));
    REQUIRE(state_of(target) == before);
  };

  // One group where the file has two.
  tg::optim::SGD one_group(target.model.parameters(), {.lr = 0.3});
  refuses([&] { tg::load(target.model, one_group, path); }, "holds 2 parameter groups, the optimizer 1");
  // The same groups, with the head's weight moved into the body's group.
  std::vector<tg::Tensor> body = target.body();
  body.push_back(target.model.at<tg::nn::Linear>(3).weight);
  tg::optim::SGD moved(body, {.lr = 0.3});
  moved.add_param_group({target.model.at<tg::nn::Linear>(3).bias});
  refuses([&] { tg::load(target.model, moved, path); },
          "parameter group 0 holds [\"0.weight\",\"0.bias\",\"2.weight\",\"2.bias\"] in the file but "
          "[\"0.weight\",\"0.bias\",\"2.weight\",\"2.bias\",\"3.weight\"] in the optimizer");
  // Another kind of scheduler, and a file without scheduler state.
  tg::optim::CosineAnnealingLR cosine(target.optimizer, 10);
  refuses([&] { tg::load(target.model, target.optimizer, cosine, path); },
          "holds the state of a StepLR scheduler, not CosineAnnealingLR");
  refuses([&] { tg::load(target.model, target.optimizer, target.scheduler, without_scheduler); },
          "has no 'tapegrad.scheduler' in its metadata");
}

TEST_CASE("a format-1 SGD checkpoint loads only into an optimizer with one group", "[io][checkpoint][optim][errors]") {
  tg::nn::Sequential model(tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::LayerNorm({4}));
  std::vector<tg::Tensor> first = model.parameters();
  first.resize(2);
  tg::optim::SGD optimizer(first, {.lr = 1.0});
  optimizer.add_param_group({model.at<tg::nn::LayerNorm>(2).weight, model.at<tg::nn::LayerNorm>(2).bias});
  REQUIRE_TG_ERROR(tg::load(model, optimizer, fixture_path("tapegrad_sgd.safetensors")),
                   Catch::Contains("tapegrad_sgd.safetensors': SGD: load_state_dict: expected 2 parameter groups, got 1"));
  REQUIRE(optimizer.lr() == 1.0);
}
