// DistributedSampler: every replica's share of epochs 0, 1 and 5 against PyTorch's
// (distributed_sampler.txt), and its errors.
#include "data_test_util.hpp"

#include <tapegrad/data/distributed_sampler.hpp>

using namespace tg;
using tg::testing::fixture;

TEST_CASE("DistributedSampler partitions as PyTorch 1.13's, epoch after epoch", "[data][sampler][fixture]") {
  static_assert(data::Sampler<data::DistributedSampler>);
  const int64_t n = GENERATE(0, 1, 2, 10, 11, 100);
  const int64_t replicas = GENERATE(1, 3, 4);
  const bool shuffle = GENERATE(true, false);
  const bool drop_last = GENERATE(false, true);
  const uint64_t seed = shuffle ? GENERATE(0u, 7u) : 0u;
  const std::string name =
      tg::detail::concat("n", n, "_r", replicas, "_shuffle", int(shuffle), "_drop", int(drop_last), "_seed", seed);
  INFO(name);
  const auto& expected = fixture("distributed_sampler.txt", name);
  std::vector<int64_t> order;
  for (const int64_t epoch : {0, 1, 5}) {
    for (int64_t rank = 0; rank < replicas; ++rank) {
      data::DistributedSampler sampler(n, {.num_replicas = replicas, .rank = rank, .shuffle = shuffle, .seed = seed,
                                           .drop_last = drop_last});
      sampler.set_epoch(epoch);
      CHECK(sampler.epoch() == epoch);
      CHECK(sampler.size() == expected.ints("length")[0]);
      const std::vector<int64_t> share = sampler.indices();
      CHECK(static_cast<int64_t>(share.size()) == sampler.size());
      CHECK(sampler.indices() == share);  // the epoch, not the call, chooses the order
      order.insert(order.end(), share.begin(), share.end());
    }
  }
  CHECK(order == expected.ints("order"));
}

TEST_CASE("DistributedSampler's shares cover the dataset once each when the size divides", "[data][sampler]") {
  std::vector<int64_t> all;
  for (int64_t rank = 0; rank < 4; ++rank) {
    data::DistributedSampler sampler(12, {.num_replicas = 4, .rank = rank, .seed = 3});
    const std::vector<int64_t> share = sampler.indices();
    all.insert(all.end(), share.begin(), share.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(12);
  std::iota(expected.begin(), expected.end(), int64_t{0});
  CHECK(all == expected);
}

TEST_CASE("DistributedSampler refuses a bad rank, replica count or size, as PyTorch does", "[data][sampler][errors]") {
  REQUIRE_TG_ERROR(data::DistributedSampler(10, {.num_replicas = 2, .rank = 2}),
                   Catch::Contains("DistributedSampler") && Catch::Contains("Invalid rank 2, rank should be in the interval [0, 1]"));
  REQUIRE_TG_ERROR(data::DistributedSampler(10, {.num_replicas = 2, .rank = -1}), Catch::Contains("Invalid rank -1"));
  REQUIRE_TG_ERROR(data::DistributedSampler(10, {.num_replicas = 0}), Catch::Contains("num_replicas >= 1, got 0"));
  REQUIRE_TG_ERROR(data::DistributedSampler(-1), Catch::Contains("dataset size >= 0, got -1"));
}
