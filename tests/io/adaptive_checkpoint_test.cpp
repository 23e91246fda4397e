// Checkpoints of Adam (per-parameter "step", exp_avg, exp_avg_sq, max_exp_avg_sq) with a
// warm-up-then-cosine SequentialLR, of OneCycleLR (which drives the momentum) and of
// ReduceLROnPlateau (whose counters start at infinity): resuming is bit for bit the same as never
// stopping.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using tg::io_test::scratch_path;

namespace {

// A small MLP on a fixed stream of mini-batches, so that two runs see the same data.
struct Training {
  tg::nn::Sequential model{tg::nn::Linear(3, 16), tg::nn::ReLU(), tg::nn::Linear(16, 2)};

  // Steps [from, to) of one mini-batch each; after_step(step) runs the scheduler.
  template <typename Optimizer>
  void run(Optimizer& optimizer, int from, int to, const std::function<void(int, double)>& after_step) {
    for (int step = from; step < to; ++step) {
      tg::manual_seed(500 + static_cast<uint64_t>(step));
      const tg::Tensor x = tg::randn({8, 3});
      const tg::Tensor target = tg::randn({8, 2});
      optimizer.zero_grad();
      tg::Tensor loss = tg::nn::mse_loss(model(x), target);
      loss.backward();
      optimizer.step();
      after_step(step, loss.item());
    }
  }
};

// The parameters' bytes and every state tensor's, in order.
std::string bytes_of(Training& t, const tg::optim::Optimizer& optimizer) {
  std::string bytes;
  const auto append = [&bytes](const tg::Tensor& tensor) {
    const tg::Tensor f = tensor.to(tg::kFloat64);
    bytes.append(reinterpret_cast<const char*>(f.data<double>()), static_cast<size_t>(f.numel()) * sizeof(double));
  };
  for (const tg::Tensor& p : t.model.parameters()) append(p);
  for (size_t i = 0; i < optimizer.parameters().size(); ++i)
    for (const auto& [name, tensor] : optimizer.state(i)) {
      bytes += name;
      append(tensor);
    }
  return bytes;
}

}  // namespace

TEST_CASE("Adam with a warm-up-then-cosine schedule resumes from a checkpoint bit for bit", "[io][checkpoint][optim]") {
  const auto make = [](Training& t) {
    struct Run {
      tg::optim::Adam adam;
      tg::optim::LinearLR warmup;
      tg::optim::CosineAnnealingLR cosine;
      tg::optim::SequentialLR schedule;
      explicit Run(Training& t)
          : adam(t.model.parameters(), {.lr = 0.01, .weight_decay = 1e-3, .amsgrad = true}),
            warmup(adam, {.start_factor = 0.1, .total_iters = 4}),
            cosine(adam, 16),
            schedule(adam, {warmup, cosine}, {4}) {}
    };
    return std::make_unique<Run>(t);
  };
  tg::manual_seed(1);
  Training straight;
  auto straight_run = make(straight);
  straight.run(straight_run->adam, 0, 20, [&](int, double) { straight_run->schedule.step(); });

  tg::manual_seed(1);
  Training first;
  auto first_run = make(first);
  first.run(first_run->adam, 0, 7, [&](int, double) { first_run->schedule.step(); });
  const std::string path = scratch_path("adam_sequential.safetensors");
  tg::save(first.model, first_run->adam, first_run->schedule, path);

  tg::manual_seed(2);  // other weights, all overwritten by the load
  Training resumed;
  auto resumed_run = make(resumed);
  tg::load(resumed.model, resumed_run->adam, resumed_run->schedule, path);
  REQUIRE(resumed_run->schedule.last_epoch() == 7);
  REQUIRE(resumed_run->adam.state(0).at("step").item() == 7.0);
  REQUIRE(resumed_run->adam.lr() == first_run->adam.lr());
  resumed.run(resumed_run->adam, 7, 20, [&](int, double) { resumed_run->schedule.step(); });
  REQUIRE(bytes_of(resumed, resumed_run->adam) == bytes_of(straight, straight_run->adam));
  REQUIRE(resumed_run->adam.lr() == straight_run->adam.lr());

  // Another optimizer's state is refused, naming both.
  tg::optim::AdamW adamw(resumed.model.parameters(), {});
  REQUIRE_TG_ERROR(tg::load(resumed.model, adamw, path), Catch::Contains("holds the state of a Adam optimizer, not AdamW"));
}

TEST_CASE("OneCycleLR and ReduceLROnPlateau resume from a checkpoint", "[io][checkpoint][optim]") {
  SECTION("OneCycleLR drives SGD's momentum, which the optimizer's state carries") {
    const auto run = [](Training& t, tg::optim::SGD& sgd, tg::optim::OneCycleLR& cycle, int from, int to) {
      t.run(sgd, from, to, [&](int, double) { cycle.step(); });
    };
    tg::manual_seed(3);
    Training straight;
    tg::optim::SGD straight_sgd(straight.model.parameters(), {.lr = 0.1, .momentum = 0.9});
    tg::optim::OneCycleLR straight_cycle(straight_sgd, 0.5, 20);
    run(straight, straight_sgd, straight_cycle, 0, 20);

    tg::manual_seed(3);
    Training first;
    tg::optim::SGD first_sgd(first.model.parameters(), {.lr = 0.1, .momentum = 0.9});
    tg::optim::OneCycleLR first_cycle(first_sgd, 0.5, 20);
    run(first, first_sgd, first_cycle, 0, 9);
    const std::string path = scratch_path("onecycle.safetensors");
    tg::save(first.model, first_sgd, first_cycle, path);

    Training resumed;
    tg::optim::SGD resumed_sgd(resumed.model.parameters(), {.lr = 0.1, .momentum = 0.9});
    tg::optim::OneCycleLR resumed_cycle(resumed_sgd, 0.5, 20);
    tg::load(resumed.model, resumed_sgd, resumed_cycle, path);
    REQUIRE(resumed_sgd.options().momentum == first_sgd.options().momentum);
    run(resumed, resumed_sgd, resumed_cycle, 9, 20);
    REQUIRE(bytes_of(resumed, resumed_sgd) == bytes_of(straight, straight_sgd));
  }
  SECTION("ReduceLROnPlateau's best (infinite before the first step) and counters round-trip") {
    tg::manual_seed(4);
    Training t;
    tg::optim::RMSprop rmsprop(t.model.parameters(), {.lr = 0.01, .momentum = 0.5, .centered = true});
    tg::optim::ReduceLROnPlateau plateau(rmsprop, {.factor = 0.5, .patience = 0, .cooldown = 3});
    const std::string fresh = scratch_path("plateau_fresh.safetensors");
    tg::save(t.model, rmsprop, plateau, fresh);
    t.run(rmsprop, 0, 6, [&](int step, double) { plateau.step(step < 2 ? 1.0 : 2.0); });  // then no progress
    const std::string path = scratch_path("plateau.safetensors");
    tg::save(t.model, rmsprop, plateau, path);

    tg::optim::RMSprop other(t.model.parameters(), {.lr = 0.01, .momentum = 0.5, .centered = true});
    tg::optim::ReduceLROnPlateau resumed(other, {.factor = 0.5, .patience = 0, .cooldown = 3});
    tg::load(t.model, other, resumed, path);
    REQUIRE(resumed.best() == 1.0);
    REQUIRE(resumed.num_bad_epochs() == plateau.num_bad_epochs());
    REQUIRE(resumed.cooldown_counter() == plateau.cooldown_counter());
    REQUIRE(resumed.last_epoch() == 6);
    REQUIRE(other.lr() == rmsprop.lr());
    REQUIRE(bytes_of(t, other) == bytes_of(t, rmsprop));
    tg::load(t.model, other, resumed, fresh);
    REQUIRE(resumed.best() == INFINITY);
    REQUIRE(resumed.last_epoch() == 0);
  }
}
