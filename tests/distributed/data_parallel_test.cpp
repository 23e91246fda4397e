// DataParallel against one process training on the whole batch: rank 0's weights everywhere after
// construction, the same steps (to 1e-12 in float64) in the default mode, bitwise the same in exact
// mode, buckets in reverse registration order, no_sync, unused parameters, a checkpoint written by
// rank 0 and resumed by all, and misuse.
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
    std::vector<Tensor> sum;
    for (int64_t shard = 0; shard < kShards; ++shard) {
      reference.zero_grad();
      nn::cross_entropy(reference(rows(x, shard * kShardSize, (shard + 1) * kShardSize)),
                        rows(y, shard * kShardSize, (shard + 1) * kShardSize)).backward();
      const std::vector<Tensor> parameters = reference.parameters();
      for (size_t i = 0; i < parameters.size(); ++i) {
        if (shard == 0) sum.push_back(parameters[i].grad());
        else sum[i] = sum[i] + parameters[i].grad();
      }
    }
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
