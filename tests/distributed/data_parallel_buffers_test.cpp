// DataParallel and module buffers, as DDP with broadcast_buffers=True: rank 0's buffers everywhere
// after construction; before each forward rank 0's buffers replace every rank's, so BatchNorm's
// running statistics after a forward are rank 0's from the step before, updated with this rank's
// share of the batch (checked against the update written out by hand); no broadcast after a
// forward under NoGradGuard or inside no_sync(); exact mode stays bitwise the fixed-order sum of
// the shard gradients with BatchNorm in the model; ranks whose buffers differ are refused.
#include "distributed_test_util.hpp"

using namespace tg;

namespace {

constexpr int64_t kBatch = 12;  // divisible by 1, 2, 3 ranks and by 6 shards
constexpr double kMomentum = 0.1;  // BatchNorm's default

// BatchNorm2d over the input's 3 channels, then a linear classifier of the normalised pixels.
struct BnNet : nn::Module {
  nn::BatchNorm2d bn{3};
  nn::Linear lin{3 * 2 * 2, 3};
  void members(nn::Members& m) override {
    m.module("bn", bn);
    m.module("lin", lin);
  }
  Tensor forward(const Tensor& x) override { return lin(bn(x).flatten(1)); }
};

BnNet make_bn_net(uint64_t seed) {
  manual_seed(seed);
  BnNet net;
  net.to(kFloat64);
  return net;
}

// The same data on every rank: images [kBatch, 3, 2, 2] (per-channel offsets, so the running
// means move visibly) and classes [kBatch] for step `step`.
std::pair<Tensor, Tensor> image_batch(int step) {
  manual_seed(2000 + static_cast<uint64_t>(step));
  const Tensor offsets = tensor({1.0, -2.0, 0.5}, {1, 3, 1, 1}, kFloat64);
  return {randn({kBatch, 3, 2, 2}, kFloat64) * 1.5 + offsets, randint(3, {kBatch})};
}

Tensor rows(const Tensor& t, int64_t begin, int64_t end) {
  std::vector<double> index;
  for (int64_t i = begin; i < end; ++i) index.push_back(double(i));
  return t.index_select(0, tensor(index, {}, kInt64));
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.dtype() == kInt64 ? a.to_vector<int64_t>() == b.to_vector<int64_t>()
                             : a.to_vector<double>() == b.to_vector<double>();
}

double max_difference(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item(); }

// BatchNorm's running-statistics update with the statistics of `x` ([n, C, H, W]), by hand:
// mean ← (1 − m)·mean + m·x̄, var ← (1 − m)·var + m·s² with the unbiased s² over n·H·W values.
std::pair<Tensor, Tensor> updated_stats(const std::pair<Tensor, Tensor>& running, const Tensor& x) {
  const auto count = static_cast<double>(x.numel() / x.size(1));
  const Tensor mean = x.mean({0, 2, 3});
  const Tensor unbiased = (x - mean.reshape({1, -1, 1, 1})).pow(2.0).sum({0, 2, 3}) / (count - 1);
  return {running.first * (1 - kMomentum) + mean * kMomentum, running.second * (1 - kMomentum) + unbiased * kMomentum};
}

// Every rank's copy of t, bitwise equal to rank 0's.
bool same_on_every_rank(const Tensor& t) {
  const Tensor all = dist::all_gather(t.detach().reshape({-1}));
  for (int r = 1; r < dist::world_size(); ++r) {
    if (!bitwise_equal(rows(all, r, r + 1), rows(all, 0, 1))) return false;
  }
  return true;
}

// A module with a buffer whose shape or dtype a test chooses per rank.
struct Buffered : nn::Module {
  nn::Linear lin{4, 3};
  Tensor stat;
  explicit Buffered(Tensor stat_) : stat(std::move(stat_)) {}
  void members(nn::Members& m) override {
    m.module("lin", lin);
    m.buffer("stat", stat);
  }
  Tensor forward(const Tensor& x) override { return lin(x); }
};

}  // namespace

TEST_CASE("DataParallel starts every rank from rank 0's buffers", "[dist][data_parallel][buffers]") {
  const auto me = static_cast<double>(dist::rank());
  BnNet net = make_bn_net(static_cast<uint64_t>(dist::rank()));
  net.bn.running_mean.fill_(me + 1);
  net.bn.running_var.fill_(2 * me + 3);
  net.bn.num_batches_tracked.fill_(me + 5);
  dist::DataParallel ddp(net);
  CHECK(bitwise_equal(net.bn.running_mean, full({3}, 1.0, kFloat64)));
  CHECK(bitwise_equal(net.bn.running_var, full({3}, 3.0, kFloat64)));
  CHECK(net.bn.num_batches_tracked.dtype() == kInt64);
  CHECK(net.bn.num_batches_tracked.item<int64_t>() == 5);
  BnNet reference = make_bn_net(0);
  const std::vector<Tensor> mine = net.parameters(), expected = reference.parameters();
  for (size_t i = 0; i < mine.size(); ++i) CHECK(bitwise_equal(mine[i], expected[i]));
}

TEST_CASE("DataParallel broadcasts rank 0's running statistics before each forward, as DDP",
          "[dist][data_parallel][buffers]") {
  const int ranks = dist::world_size();
  const int64_t share = kBatch / ranks, begin = dist::rank() * share;
  BnNet net = make_bn_net(0);
  BnNet reference = make_bn_net(0);
  dist::DataParallel ddp(net);
  optim::SGD optimizer(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_optimizer(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  // Rank 0's running statistics, step by step: what every rank starts each forward from.
  std::pair<Tensor, Tensor> rank0{zeros({3}, kFloat64), ones({3}, kFloat64)};
  for (int step = 0; step < 8; ++step) {
    INFO("step " << step);
    const auto [x, y] = image_batch(step);
    optimizer.zero_grad();
    const Tensor output = ddp(rows(x, begin, begin + share));
    // After the forward: rank 0's statistics from the last step, updated with this rank's share.
    const auto expected = updated_stats(rank0, rows(x, begin, begin + share));
    CHECK(max_difference(net.bn.running_mean, expected.first) <= 1e-13);
    CHECK(max_difference(net.bn.running_var, expected.second) <= 1e-13);
    CHECK(net.bn.num_batches_tracked.item<int64_t>() == step + 1);
    rank0 = updated_stats(rank0, rows(x, 0, share));
    ddp.backward(nn::cross_entropy(output, rows(y, begin, begin + share)));
    optimizer.step();
    // The gradient is the mean over the ranks of each share's gradient, BatchNorm normalising each
    // share with its own statistics: the same as one process running the shares one by one.
    reference_optimizer.zero_grad();
    std::vector<Tensor> sum;
    for (int r = 0; r < ranks; ++r) {
      reference.zero_grad();
      nn::cross_entropy(reference(rows(x, r * share, (r + 1) * share)), rows(y, r * share, (r + 1) * share)).backward();
      const std::vector<Tensor> parameters = reference.parameters();
      for (size_t i = 0; i < parameters.size(); ++i) {
        if (r == 0) sum.push_back(parameters[i].grad());
        else sum[i] = sum[i] + parameters[i].grad();
      }
    }
    std::vector<Tensor> parameters = reference.parameters();
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].set_grad(sum[i] / double(ranks));
    reference_optimizer.step();
    const std::vector<Tensor> mine = net.parameters();
    for (size_t i = 0; i < mine.size(); ++i) CHECK(max_difference(mine[i], parameters[i]) <= 1e-12);
  }
  // The next forward (evaluation mode, under no grad) starts from rank 0's statistics everywhere
  // and leaves them as they are: every rank holds rank 0's, bit for bit.
  net.eval();
  {
    NoGradGuard no_grad;
    const auto [x, y] = image_batch(100);
    ddp(x);
  }
  CHECK(max_difference(net.bn.running_mean, rank0.first) <= 1e-13);
  CHECK(max_difference(net.bn.running_var, rank0.second) <= 1e-13);
  CHECK(same_on_every_rank(net.bn.running_mean));
  CHECK(same_on_every_rank(net.bn.running_var));
  CHECK(same_on_every_rank(net.bn.num_batches_tracked));
  CHECK(net.bn.num_batches_tracked.item<int64_t>() == 8);
}

TEST_CASE("DataParallel broadcasts buffers only after a forward with grad mode on, outside no_sync, as DDP",
          "[dist][data_parallel][buffers]") {
  const auto me = static_cast<double>(dist::rank());
  BnNet net = make_bn_net(0);
  dist::DataParallel ddp(net);
  const auto [x, y] = image_batch(0);
  net.eval();  // eval mode: a forward leaves the running statistics as they are
  const auto mine = [&] { net.bn.running_mean.fill_(me + 10); };
  const auto holds = [&](double value) { return bitwise_equal(net.bn.running_mean, full({3}, value, kFloat64)); };
  mine();
  ddp(x);  // the first forward broadcasts
  CHECK(holds(10));
  mine();
  {
    NoGradGuard no_grad;
    ddp(x);  // due after the grad-mode forward before it
    CHECK(holds(10));
    mine();
    ddp(x);  // not due: the previous forward ran under no grad
    CHECK(holds(me + 10));
  }
  ddp(x);  // not due either (the previous forward ran under no grad); due next time
  CHECK(holds(me + 10));
  ddp(x);
  CHECK(holds(10));
  mine();
  {
    auto guard = ddp.no_sync();
    ddp(x);  // due: the forward before ran outside no_sync
    CHECK(holds(10));
    mine();
    ddp(x);
    CHECK(holds(me + 10));
  }
  ddp(x);
  CHECK(holds(me + 10));
  ddp(x);
  CHECK(holds(10));
  // broadcast_buffers = false: the constructor still broadcasts, forwards never do.
  mine();
  dist::DataParallel quiet(net, {.broadcast_buffers = false});
  CHECK(holds(10));
  mine();
  quiet(x);
  quiet(x);
  CHECK(holds(me + 10));
}

TEST_CASE("DataParallel's exact mode with BatchNorm is bitwise the fixed-order sum of the shard gradients",
          "[dist][data_parallel][buffers][exact]") {
  constexpr int64_t kShards = 6;
  constexpr int64_t kShardSize = kBatch / kShards;
  BnNet net = make_bn_net(static_cast<uint64_t>(dist::rank()));
  BnNet reference = make_bn_net(0);
  dist::DataParallel ddp(net, {.exact_shards = kShards});
  optim::SGD optimizer(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_optimizer(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  std::pair<Tensor, Tensor> rank0{zeros({3}, kFloat64), ones({3}, kFloat64)};
  for (int step = 0; step < 5; ++step) {
    const auto [x, y] = image_batch(step);
    optimizer.zero_grad();
    for (int64_t local = 0; local < ddp.local_shards(); ++local) {
      const int64_t shard = ddp.global_shard(local);
      const Tensor xs = rows(x, shard * kShardSize, (shard + 1) * kShardSize);
      const Tensor output = ddp(xs);
      // Each forward starts from rank 0's statistics after its previous forward.
      const auto expected = updated_stats(rank0, xs);
      CHECK(max_difference(net.bn.running_mean, expected.first) <= 1e-13);
      CHECK(max_difference(net.bn.running_var, expected.second) <= 1e-13);
      rank0 = updated_stats(rank0, rows(x, local * kShardSize, (local + 1) * kShardSize));  // rank 0's shard `local`
      ddp.backward(nn::cross_entropy(output, rows(y, shard * kShardSize, (shard + 1) * kShardSize)));
    }
    optimizer.step();
    // One process, shard after shard: (g_0 + ... + g_5) / 6, summed in shard order.
    std::vector<Tensor> sum;
    for (int64_t shard = 0; shard < kShards; ++shard) {
      reference.zero_grad();
      nn::cross_entropy(reference(rows(x, shard * kShardSize, (shard + 1) * kShardSize)),
                        rows(y, shard * kShardSize, (shard + 1) * kShardSize))
          .backward();
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
}

TEST_CASE("DataParallel refuses ranks whose buffers differ, on every rank", "[dist][data_parallel][buffers][errors]") {
  const int ranks = dist::world_size();
  const bool first = dist::rank() == 0, last = dist::rank() == ranks - 1;
  if (ranks > 1) {
    manual_seed(0);
    Buffered shape(zeros({first ? 3 : 2}, kFloat64));
    REQUIRE_TG_ERROR(dist::DataParallel(shape), Catch::Contains("buffer 'stat' differs between the ranks") &&
                                                    Catch::Contains("shape [3]") && Catch::Contains("shape [2]"));
    Buffered dtype(zeros({3}, first ? kFloat32 : kInt64));
    REQUIRE_TG_ERROR(dist::DataParallel(dtype), Catch::Contains("buffer 'stat' differs between the ranks") &&
                                                    Catch::Contains("float32") && Catch::Contains("int64"));
    Buffered absent(first ? zeros({3}) : Tensor());
    REQUIRE_TG_ERROR(dist::DataParallel(absent), Catch::Contains("rank 0 has 2 parameters and 1 buffers") &&
                                                     Catch::Contains("has 2 parameters and 0 buffers"));
    nn::Linear lin(4, 3);
    REQUIRE_TG_ERROR(dist::DataParallel(lin, {.broadcast_buffers = !last}), Catch::Contains(".broadcast_buffers = 1") &&
                                                                                Catch::Contains(".broadcast_buffers = 0"));
  }
  // A buffer replaced by one of another shape after construction: the next forward throws on
  // every rank (this one names the buffer), and works again once the layout is back.
  Buffered net(zeros({3}, kFloat64));
  net.to(kFloat64);
  dist::DataParallel ddp(net);
  const Tensor x = ones({2, 4}, kFloat64);
  ddp(x);
  if (last) net.stat = zeros({4}, kFloat64);
  REQUIRE_TG_ERROR(ddp(x), Catch::Contains("buffers must keep the names, shapes and dtypes") &&
                               Catch::Contains(tg::detail::concat("they changed on rank ", ranks - 1)));
  if (last) {
    REQUIRE_TG_ERROR(ddp(x), Catch::Contains("(here buffer 'stat' was a float64 tensor of shape [3], now 'stat' is a "
                                             "float64 tensor of shape [4])"));
  } else {
    REQUIRE_TG_ERROR(ddp(x), Catch::Contains(tg::detail::concat("they changed on rank ", ranks - 1)) &&
                                 !Catch::Contains("(here"));
  }
  if (last) net.stat = zeros({3}, kFloat64);
  if (first) net.stat.fill_(7.0);
  ddp(x);
  CHECK(bitwise_equal(net.stat, full({3}, 7.0, kFloat64)));
}
