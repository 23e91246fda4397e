// DataParallel against one process training on the whole batch: rank 0's weights everywhere after
// construction, the same steps (to 1e-12 in float64) in the default mode, bitwise the same in exact
// mode, buckets in reverse registration order, no_sync, unused parameters, a checkpoint written by
// rank 0 and resumed by all, misuse, and the autograd features through DataParallel: a custom
// function inside the model, a gradient penalty, and create_graph refused.
#include "distributed_test_util.hpp"

using namespace tg;

namespace {

// A small classifier; `extra` takes part only where use_extra is set (for the unused-parameter cases).
struct Net : nn::Module {
  nn::Linear lin1{4, 8};
  nn::LayerNorm norm{{8}};
  nn::Linear lin2{8, 3};
  nn::Linear extra{8, 3};
  bool use_extra = true;
  void members(nn::Members& m) override {
    m.module("lin1", lin1);
    m.module("norm", norm);
    m.module("lin2", lin2);
    m.module("extra", extra);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor hidden = norm(lin1(x).relu());
    return use_extra ? lin2(hidden) + extra(hidden) : lin2(hidden);
  }
};

// y = A · tanh(γ ⊙ x + β) as one custom node (docs/guide/custom-functions.md's example). x: [N, F];
// γ, β: [F], broadcast over the rows. With t = y / A and u = γ ⊙ x + β, dy/du = A (1 − t²):
//   dx = g · A (1 − t²) · γ,   dγ = Σ_rows g · A (1 − t²) · x,   dβ = Σ_rows g · A (1 − t²).
// Backward is written with tg operations from the saved x, γ and y, so under create_graph it is
// recorded and can be differentiated again (the gradient penalty below needs that).
struct ScaledTanh : autograd::Function<ScaledTanh> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        double amplitude) {
    Tensor y = (x * gamma + beta).tanh() * amplitude;
    ctx->save_for_backward({x, gamma, y});
    ctx->saved_data["amplitude"] = amplitude;
    return y;
  }
  static autograd::variable_list backward(autograd::AutogradContext* ctx, autograd::variable_list grad_outputs) {
    const autograd::variable_list saved = ctx->get_saved_variables();
    const double amplitude = ctx->saved_data["amplitude"].toDouble();
    const Tensor t = saved[2] / amplitude;
    const Tensor grad_u = grad_outputs[0] * amplitude * (1.0 - t * t);
    Tensor grad_x, grad_gamma, grad_beta;
    if (ctx->needs_input_grad(0)) grad_x = grad_u * saved[1];
    if (ctx->needs_input_grad(1)) grad_gamma = (grad_u * saved[0]).sum({0});
    if (ctx->needs_input_grad(2)) grad_beta = grad_u.sum({0});
    return {grad_x, grad_gamma, grad_beta, Tensor()};
  }
};

// Linear → ScaledTanh (γ, β: parameters of this module, inputs of the custom node) → Linear, with
// `outputs` outputs: 3 classes, or 1 for a critic.
struct FusedNet : nn::Module {
  nn::Linear lin1{4, 8};
  nn::Parameter gamma{"FusedNet.gamma", randn({8})};
  nn::Parameter beta{"FusedNet.beta", randn({8})};
  nn::Linear lin2;
  explicit FusedNet(int64_t outputs) : lin2(8, outputs) {}
  void members(nn::Members& m) override {
    m.module("lin1", lin1);
    m.parameter("gamma", gamma);
    m.parameter("beta", beta);
    m.module("lin2", lin2);
  }
  Tensor forward(const Tensor& x) override { return lin2(ScaledTanh::apply(lin1(x), gamma, beta, 1.7159)); }
};

// A float64 FusedNet whose initial weights come from seed `seed`.
FusedNet make_fused_net(uint64_t seed, int64_t outputs) {
  manual_seed(seed);
  FusedNet net(outputs);
  net.to(kFloat64);
  return net;
}

// A float64 Net whose initial weights come from seed `seed`.
Net make_net(uint64_t seed) {
  manual_seed(seed);
  Net net;
  net.to(kFloat64);
  return net;
}

constexpr int64_t kBatch = 12;  // divisible by 1, 2, 3 ranks and by 6 shards

// The same data on every rank: inputs [kBatch, 4] and classes [kBatch] for step `step`.
std::pair<Tensor, Tensor> batch_of(int step) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  return {randn({kBatch, 4}, kFloat64), randint(3, {kBatch})};
}

// Rows [begin, end) of t.
Tensor rows(const Tensor& t, int64_t begin, int64_t end) {
  std::vector<double> index;
  for (int64_t i = begin; i < end; ++i) index.push_back(double(i));
  return t.index_select(0, tensor(index, {}, kInt64));
}

// max |a − b| / max |b|
double relative_difference(const Tensor& a, const Tensor& b) {
  const double scale = b.abs().max().item();
  return (a - b).abs().max().item() / (scale > 0 ? scale : 1.0);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

// This rank's parameters, gathered from every rank: [world_size, numel] per parameter.
std::vector<Tensor> gathered_parameters(nn::Module& module) {
  std::vector<Tensor> gathered;
  for (const Tensor& p : module.parameters()) gathered.push_back(dist::all_gather(p.detach().reshape({-1})));
  return gathered;
}

}  // namespace

TEST_CASE("DataParallel starts every rank from rank 0's parameters", "[dist][data_parallel]") {
  Net net = make_net(static_cast<uint64_t>(dist::rank()));  // a different start on each rank
  Net reference = make_net(0);
  dist::DataParallel ddp(net);
  const std::vector<Tensor> mine = net.parameters(), expected = reference.parameters();
  for (size_t i = 0; i < mine.size(); ++i) CHECK(bitwise_equal(mine[i], expected[i]));
}

TEST_CASE("DataParallel buckets the parameters in reverse registration order", "[dist][data_parallel]") {
  Net net = make_net(0);
  using Names = std::vector<std::vector<std::string>>;
  // One bucket holds all of them at the default 25 MiB.
  CHECK(dist::DataParallel(net).buckets() ==
        Names{{"extra.bias", "extra.weight", "lin2.bias", "lin2.weight", "norm.bias", "norm.weight", "lin1.bias", "lin1.weight"}});
  // 200 bytes: 25 float64 values. A weight of 24 values leaves no room for a bias of 3 beside it;
  // norm's two [8] and lin1.bias [8] fit together; lin1.weight (32 values) is a bucket of its own.
  CHECK(dist::DataParallel(net, {.bucket_cap_mb = 200.0 / (1024 * 1024)}).buckets() ==
        Names{{"extra.bias"}, {"extra.weight"}, {"lin2.bias"}, {"lin2.weight"}, {"norm.bias", "norm.weight", "lin1.bias"},
              {"lin1.weight"}});
}

TEST_CASE("DataParallel trains as one process on the whole batch, to 1e-12 in float64, and reproducibly",
          "[dist][data_parallel]") {
  const double bucket_cap_mb = GENERATE(25.0, 200.0 / (1024 * 1024));  // one bucket, or six
  INFO("bucket_cap_mb " << bucket_cap_mb);
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;

  // Two runs of 20 steps on every rank, and the single-process reference beside them.
  std::vector<std::vector<Tensor>> runs;
  for (int run = 0; run < 2; ++run) {
    Net net = make_net(static_cast<uint64_t>(dist::rank()));
    Net reference = make_net(0);
    dist::DataParallel ddp(net, {.bucket_cap_mb = bucket_cap_mb});
    optim::SGD optimizer(net.parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::SGD reference_optimizer(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
    for (int step = 0; step < 20; ++step) {
      const auto [x, y] = batch_of(step);
      optimizer.zero_grad();
      ddp.backward(nn::cross_entropy(ddp(rows(x, begin, begin + share)), rows(y, begin, begin + share)));
      optimizer.step();
      reference_optimizer.zero_grad();
      nn::cross_entropy(reference(x), y).backward();
      reference_optimizer.step();
      const std::vector<Tensor> mine = net.parameters(), expected = reference.parameters();
      for (size_t i = 0; i < mine.size(); ++i) {
        INFO("step " << step << ", parameter " << net.named_parameters()[i].first);
        CHECK(relative_difference(mine[i], expected[i]) <= 1e-12);
      }
    }
    // Every rank holds the same weights, bit for bit.
    for (const Tensor& all : gathered_parameters(net)) {
      for (int r = 1; r < ranks; ++r) CHECK(bitwise_equal(rows(all, r, r + 1), rows(all, 0, 1)));
    }
    runs.push_back(net.parameters());
  }
  for (size_t i = 0; i < runs[0].size(); ++i) CHECK(bitwise_equal(runs[0][i], runs[1][i]));
}

// The sum over `shards` equal slices of the batch, in slice order, of each parameter's gradient of
// the slice's cross-entropy, computed in one process: exact mode's definition (times the count).
template <typename Model>
std::vector<Tensor> shard_gradient_sum(Model& reference, const Tensor& x, const Tensor& y, int64_t shards) {
  const int64_t size = x.size(0) / shards;
  std::vector<Tensor> sum;
  for (int64_t shard = 0; shard < shards; ++shard) {
    reference.zero_grad();
    nn::cross_entropy(reference(rows(x, shard * size, (shard + 1) * size)), rows(y, shard * size, (shard + 1) * size))
        .backward();
    const std::vector<Tensor> parameters = reference.parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (shard == 0) sum.push_back(parameters[i].grad());
      else sum[i] = sum[i] + parameters[i].grad();
    }
  }
  return sum;
}

TEST_CASE("DataParallel's exact mode is bitwise the fixed-order sum of the shard gradients at any world size",
          "[dist][data_parallel][exact]") {
  constexpr int64_t kShards = 6;  // np 1, 2 and 3 all divide it
  constexpr int64_t kShardSize = kBatch / kShards;
  Net net = make_net(static_cast<uint64_t>(dist::rank()));
  Net reference = make_net(0);
  dist::DataParallel ddp(net, {.exact_shards = kShards});
  REQUIRE(ddp.local_shards() == kShards / dist::world_size());
  optim::SGD optimizer(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_optimizer(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 10; ++step) {
    const auto [x, y] = batch_of(step);
    optimizer.zero_grad();
    for (int64_t local = 0; local < ddp.local_shards(); ++local) {
      const int64_t shard = ddp.global_shard(local);
      ddp.backward(nn::cross_entropy(ddp(rows(x, shard * kShardSize, (shard + 1) * kShardSize)),
                                     rows(y, shard * kShardSize, (shard + 1) * kShardSize)));
    }
    optimizer.step();
    // The definition, in one process: (g_0 + g_1 + ... + g_5) / 6, summed in shard order.
    const std::vector<Tensor> sum = shard_gradient_sum(reference, x, y, kShards);
    std::vector<Tensor> parameters = reference.parameters();
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].set_grad(sum[i] / double(kShards));
    reference_optimizer.step();
    const std::vector<Tensor> mine = net.parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO("step " << step << ", parameter " << net.named_parameters()[i].first);
      CHECK(bitwise_equal(mine[i], parameters[i]));
    }
  }
  REQUIRE_TG_ERROR(ddp.no_sync(), Catch::Contains("exact mode has no no_sync()"));
  if (dist::world_size() > 1) {
    REQUIRE_TG_ERROR(dist::DataParallel(net, {.exact_shards = dist::world_size() + 1}),
                     Catch::Contains("exact_shards must be a multiple of the world size"));
  }
}

TEST_CASE("DataParallel::no_sync accumulates locally; the next backward all-reduces the sum", "[dist][data_parallel]") {
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;
  Net net = make_net(0);
  Net reference = make_net(0);
  dist::DataParallel ddp(net);
  const auto [x1, y1] = batch_of(1);
  const auto [x2, y2] = batch_of(2);
  {
    auto guard = ddp.no_sync();
    ddp.backward(nn::cross_entropy(ddp(rows(x1, begin, begin + share)), rows(y1, begin, begin + share)));
  }
  // Inside no_sync nothing travelled: this rank's gradient is its own.
  ddp.backward(nn::cross_entropy(ddp(rows(x2, begin, begin + share)), rows(y2, begin, begin + share)));
  (nn::cross_entropy(reference(x1), y1) + nn::cross_entropy(reference(x2), y2)).backward();
  const std::vector<Tensor> mine = net.parameters(), expected = reference.parameters();
  for (size_t i = 0; i < mine.size(); ++i) CHECK(relative_difference(mine[i].grad(), expected[i].grad()) <= 1e-12);
}

TEST_CASE("DataParallel names the parameters that got no gradient, on every rank", "[dist][data_parallel][errors]") {
  const int ranks = dist::world_size();
  const bool last = dist::rank() == ranks - 1;
  const auto [x, y] = batch_of(0);
  SECTION("unused everywhere") {
    Net net = make_net(0);
    net.use_extra = false;
    dist::DataParallel ddp(net);
    REQUIRE_THROWS_WITH(ddp.backward(nn::cross_entropy(ddp(x), y)),
                        Catch::Contains(tg::detail::concat("'extra.bias' (on ", ranks, " of ", ranks, " ranks)")) &&
                            Catch::Contains("'extra.weight'") && Catch::Contains("find_unused_parameters"));
    // The wrapper is ready for the next pass.
    net.use_extra = true;
    net.zero_grad();
    ddp.backward(nn::cross_entropy(ddp(x), y));
  }
  SECTION("unused on one rank") {
    Net net = make_net(0);
    net.use_extra = !last;
    dist::DataParallel ddp(net);
    REQUIRE_THROWS_WITH(ddp.backward(nn::cross_entropy(ddp(x), y)), Catch::Contains(tg::detail::concat("'extra.weight' (on 1 of ", ranks, " ranks)")));
  }
  SECTION("allowed by find_unused_parameters") {
    if (ranks > 1) {
      Net net = make_net(0);
      Net reference = make_net(0);
      net.use_extra = !last;
      dist::DataParallel ddp(net, {.find_unused_parameters = true});
      ddp.backward(nn::cross_entropy(ddp(x), y));
      // extra's gradient: the ranks that used it, plus zeros from the last one, over all ranks.
      nn::cross_entropy(reference(x), y).backward();
      const Tensor expected = reference.extra.weight.grad() * (double(ranks - 1) / ranks);
      CHECK(relative_difference(net.extra.weight.grad(), expected) <= 1e-12);
    }
    // Unused on every rank: the grad stays undefined, as PyTorch leaves it.
    Net idle = make_net(0);
    idle.use_extra = false;
    dist::DataParallel idle_ddp(idle, {.find_unused_parameters = true});
    idle_ddp.backward(nn::cross_entropy(idle_ddp(x), y));
    CHECK_FALSE(idle.extra.weight.grad().defined());
    CHECK(idle.lin2.weight.grad().defined());
  }
}

TEST_CASE("DataParallel refuses models that differ between ranks, and a backward left unsynchronized",
          "[dist][data_parallel][errors]") {
  if (dist::world_size() > 1) {
    manual_seed(0);
    nn::Linear lin(4, dist::rank() == 0 ? 3 : 2);
    lin.to(kFloat64);
    REQUIRE_TG_ERROR(dist::DataParallel(lin), Catch::Contains("parameter 'weight' differs between the ranks") &&
                                                  Catch::Contains("shape [3, 4]") && Catch::Contains("shape [2, 4]"));
    nn::Sequential two_layers(nn::Linear(4, 4), nn::Linear(4, 4));
    nn::Linear one_layer(4, 4);
    REQUIRE_TG_ERROR(dist::DataParallel(dist::rank() == 0 ? static_cast<nn::Module&>(two_layers) : one_layer),
                     Catch::Contains("rank 0 has 4 parameters") && Catch::Contains("has 2"));
  }
  Net net = make_net(0);
  dist::DataParallel ddp(net);
  const auto [x, y] = batch_of(0);
  nn::cross_entropy(ddp(x), y).backward();  // no synchronize()
  REQUIRE_TG_ERROR(ddp(x), Catch::Contains("forward before the previous backward was synchronized"));
  ddp.synchronize();
  ddp(x);
}

TEST_CASE("A checkpoint written by rank 0 and loaded by every rank resumes training bitwise", "[dist][data_parallel][io]") {
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;
  const std::string path = tg::detail::concat(TG_DIST_SCRATCH_DIR, "/resume_np", ranks, ".safetensors");
  // `steps` steps from `first_step` on, through DataParallel.
  const auto train = [&](Net& net, optim::SGD& optimizer, int first_step, int steps) {
    dist::DataParallel ddp(net);
    for (int step = first_step; step < first_step + steps; ++step) {
      const auto [x, y] = batch_of(step);
      optimizer.zero_grad();
      ddp.backward(nn::cross_entropy(ddp(rows(x, begin, begin + share)), rows(y, begin, begin + share)));
      optimizer.step();
    }
  };
  Net uninterrupted = make_net(0);
  optim::SGD uninterrupted_optimizer(uninterrupted.parameters(), {.lr = 0.1, .momentum = 0.9});
  train(uninterrupted, uninterrupted_optimizer, 0, 8);

  Net first = make_net(0);
  optim::SGD first_optimizer(first.parameters(), {.lr = 0.1, .momentum = 0.9});
  train(first, first_optimizer, 0, 4);
  if (dist::rank() == 0) save(first, first_optimizer, path);  // the ranks' states are identical
  dist::barrier();                                             // the file is complete for everyone
  Net resumed = make_net(static_cast<uint64_t>(dist::rank()) + 50);
  optim::SGD resumed_optimizer(resumed.parameters(), {.lr = 0.1, .momentum = 0.9});
  load(resumed, resumed_optimizer, path);
  train(resumed, resumed_optimizer, 4, 4);
  const std::vector<Tensor> expected = uninterrupted.parameters(), got = resumed.parameters();
  for (size_t i = 0; i < got.size(); ++i) CHECK(bitwise_equal(got[i], expected[i]));
}

TEST_CASE("A model with a custom function trains under DataParallel as one process on the whole batch",
          "[dist][data_parallel][custom_function]") {
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;
  FusedNet net = make_fused_net(static_cast<uint64_t>(dist::rank()), 3);
  FusedNet reference = make_fused_net(0, 3);
  dist::DataParallel ddp(net);
  optim::SGD optimizer(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_optimizer(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 5; ++step) {
    const auto [x, y] = batch_of(step);
    optimizer.zero_grad();
    ddp.backward(nn::cross_entropy(ddp(rows(x, begin, begin + share)), rows(y, begin, begin + share)));
    reference_optimizer.zero_grad();
    nn::cross_entropy(reference(x), y).backward();
    // The averaged gradients are the whole batch's, γ and β (the custom node's inputs) included.
    const auto mine = net.named_parameters();
    const std::vector<Tensor> expected = reference.parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO("step " << step << ", gradient of " << mine[i].first);
      REQUIRE(mine[i].second.grad().defined());
      CHECK(relative_difference(mine[i].second.grad(), expected[i].grad()) <= 1e-12);
    }
    optimizer.step();
    reference_optimizer.step();
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO("step " << step << ", parameter " << mine[i].first);
      CHECK(relative_difference(mine[i].second, expected[i]) <= 1e-12);
    }
  }
  // Every rank holds the same weights, bit for bit.
  for (const Tensor& all : gathered_parameters(net)) {
    for (int r = 1; r < ranks; ++r) CHECK(bitwise_equal(rows(all, r, r + 1), rows(all, 0, 1)));
  }
}

TEST_CASE("A model with a custom function in exact mode is bitwise the fixed-order sum of the shard gradients",
          "[dist][data_parallel][custom_function][exact]") {
  constexpr int64_t kShards = 6;
  constexpr int64_t kShardSize = kBatch / kShards;
  FusedNet net = make_fused_net(static_cast<uint64_t>(dist::rank()), 3);
  FusedNet reference = make_fused_net(0, 3);
  dist::DataParallel ddp(net, {.exact_shards = kShards});
  const auto [x, y] = batch_of(0);
  for (int64_t local = 0; local < ddp.local_shards(); ++local) {
    const int64_t shard = ddp.global_shard(local);
    ddp.backward(nn::cross_entropy(ddp(rows(x, shard * kShardSize, (shard + 1) * kShardSize)),
                                   rows(y, shard * kShardSize, (shard + 1) * kShardSize)));
  }
  // (g_0 + g_1 + ... + g_5) / 6 in one process, summed in shard order.
  const std::vector<Tensor> sum = shard_gradient_sum(reference, x, y, kShards);
  const auto mine = net.named_parameters();
  for (size_t i = 0; i < mine.size(); ++i) {
    INFO("gradient of " << mine[i].first);
    CHECK(bitwise_equal(mine[i].second.grad(), sum[i] / double(kShards)));
  }
}

TEST_CASE("A gradient penalty trains under DataParallel as one process on the whole batch",
          "[dist][data_parallel][custom_function][create_graph]") {
  // WGAN-GP's critic loss with λ = 10: mean D(x) + λ · mean_i (‖∇ₓ D(x)_i‖ − 1)². D acts on each
  // row alone, so row i's input gradient is the gradient of Σ D w.r.t. x's row i, and the mean over
  // a rank's rows, averaged over equal shares, is the mean over the whole batch.
  const auto critic_loss = [](auto& critic, const Tensor& x) {  // a FusedNet, or DataParallel around one
    const Tensor input = x.detach().requires_grad_();
    const Tensor score = critic(input);  // [n, 1]
    const Tensor grad_input =
        autograd::grad({score.sum()}, {input}, {}, {.create_graph = true})[0];  // [n, 4], recorded
    const Tensor norm = grad_input.pow(2.0).sum({1}).sqrt();
    return score.mean() + 10.0 * (norm - 1.0).pow(2.0).mean();
  };
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;
  FusedNet net = make_fused_net(static_cast<uint64_t>(dist::rank()), 1);
  FusedNet reference = make_fused_net(0, 1);
  dist::DataParallel ddp(net);
  optim::SGD optimizer(net.parameters(), {.lr = 0.01, .momentum = 0.9});
  optim::SGD reference_optimizer(reference.parameters(), {.lr = 0.01, .momentum = 0.9});
  for (int step = 0; step < 5; ++step) {
    const Tensor x = batch_of(step).first;
    optimizer.zero_grad();
    // autograd::grad runs no accumulator: DataParallel's hooks fire once, in ddp.backward.
    ddp.backward(critic_loss(ddp, rows(x, begin, begin + share)));
    reference_optimizer.zero_grad();
    critic_loss(reference, x).backward();
    const auto mine = net.named_parameters();
    const std::vector<Tensor> expected = reference.parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO("step " << step << ", gradient of " << mine[i].first);
      REQUIRE(mine[i].second.grad().defined());
      CHECK_FALSE(mine[i].second.grad().requires_grad());
      CHECK(relative_difference(mine[i].second.grad(), expected[i].grad()) <= 1e-12);
    }
    optimizer.step();
    reference_optimizer.step();
  }
  // The penalty's part of the gradient is there: without it the first step's gradient differs.
  {
    FusedNet plain = make_fused_net(0, 1), penalised = make_fused_net(0, 1);
    const Tensor x = batch_of(0).first;
    plain(x).mean().backward();
    critic_loss(penalised, x).backward();
    CHECK(relative_difference(plain.lin1.weight.grad(), penalised.lin1.weight.grad()) > 1e-3);
    CHECK(relative_difference(plain.gamma.grad(), penalised.gamma.grad()) > 1e-3);
  }
  const std::vector<Tensor> mine = net.parameters(), expected = reference.parameters();
  for (size_t i = 0; i < mine.size(); ++i) CHECK(relative_difference(mine[i], expected[i]) <= 1e-12);
  for (const Tensor& all : gathered_parameters(net)) {
    for (int r = 1; r < ranks; ++r) CHECK(bitwise_equal(rows(all, r, r + 1), rows(all, 0, 1)));
  }
}

TEST_CASE("DataParallel refuses gradients from a backward with create_graph, on every rank, and recovers",
          "[dist][data_parallel][create_graph][errors]") {
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;
  FusedNet net = make_fused_net(0, 3);
  FusedNet reference = make_fused_net(0, 3);
  dist::DataParallel ddp(net);
  const auto [x, y] = batch_of(0);
  nn::cross_entropy(ddp(rows(x, begin, begin + share)), rows(y, begin, begin + share)).backward({.create_graph = true});
  // Called once (REQUIRE_TG_ERROR would call it twice): the message names every such parameter.
  std::string message;
  try {
    ddp.synchronize();
  } catch (const Error& error) {
    message = error.what();
  }
  CHECK_THAT(message, Catch::Contains("DataParallel") && Catch::Contains("create_graph = true") &&
                          Catch::Contains("'lin1.weight'") && Catch::Contains("'gamma'") && Catch::Contains("'beta'") &&
                          Catch::Contains("'lin2.bias'"));
  // The local gradients are left as they were, graphs included; the next pass is a normal one.
  CHECK(net.gamma.grad().requires_grad());
  net.zero_grad();
  ddp.backward(nn::cross_entropy(ddp(rows(x, begin, begin + share)), rows(y, begin, begin + share)));
  nn::cross_entropy(reference(x), y).backward();
  const std::vector<Tensor> mine = net.parameters(), expected = reference.parameters();
  for (size_t i = 0; i < mine.size(); ++i) CHECK(relative_difference(mine[i].grad(), expected[i].grad()) <= 1e-12);
}
