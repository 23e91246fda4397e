// SequentialSampler, RandomSampler and BatchSampler: orders against PyTorch (data.txt), batches by hand.
#include "data_test_util.hpp"

using namespace tg;
using tg::testing::fixture;

TEST_CASE("SequentialSampler visits 0 ... n − 1 on every pass", "[data][sampler]") {
  data::SequentialSampler sampler(4);
  static_assert(data::Sampler<data::SequentialSampler>);
  REQUIRE(sampler.size() == 4);
  REQUIRE(sampler.indices() == std::vector<int64_t>{0, 1, 2, 3});
  REQUIRE(sampler.indices() == std::vector<int64_t>{0, 1, 2, 3});
  REQUIRE(data::SequentialSampler(0).indices().empty());
  REQUIRE_TG_ERROR(data::SequentialSampler(-1), Catch::Contains("SequentialSampler") && Catch::Contains("-1"));
}

TEST_CASE("RandomSampler with a generator draws PyTorch's permutations", "[data][sampler][fixture]") {
  const int64_t n = GENERATE(1, 5, 100);
  const auto& expected = fixture("data.txt", "random_sampler_generator_n" + std::to_string(n));
  Generator generator(3);
  data::RandomSampler sampler(n, generator);
  std::vector<int64_t> passes = sampler.indices();
  const std::vector<int64_t> second = sampler.indices();
  passes.insert(passes.end(), second.begin(), second.end());
  CHECK(passes == expected.ints("order"));
}

TEST_CASE("RandomSampler without a generator seeds one from the default generator, as PyTorch does",
          "[data][sampler][fixture]") {
  const int64_t n = GENERATE(1, 5, 100);
  const auto& expected = fixture("data.txt", "random_sampler_default_n" + std::to_string(n));
  manual_seed(11);
  data::RandomSampler sampler(n);
  std::vector<int64_t> passes = sampler.indices();
  const std::vector<int64_t> second = sampler.indices();
  passes.insert(passes.end(), second.begin(), second.end());
  CHECK(passes == expected.ints("order"));
  // One 64-bit draw per pass, no more: the default generator is where torch's is.
  CHECK(randperm(5).to_vector<int64_t>() == expected.ints("after"));
}

TEST_CASE("RandomSampler refuses an empty dataset, as PyTorch does", "[data][sampler][errors]") {
  REQUIRE_TG_ERROR(data::RandomSampler(0), Catch::Contains("RandomSampler") && Catch::Contains("num_samples=0"));
}

TEST_CASE("BatchSampler cuts a pass into batches, the last one shorter unless drop_last", "[data][sampler]") {
  data::BatchSampler keep(data::SequentialSampler(10), 3, false);
  REQUIRE(keep.size() == 4);
  REQUIRE(keep.batches() == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}});
  data::BatchSampler drop(data::SequentialSampler(10), 3, true);
  REQUIRE(drop.size() == 3);
  REQUIRE(drop.batches() == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
  data::BatchSampler exact(data::SequentialSampler(4), 2, true);
  REQUIRE(exact.size() == 2);
  REQUIRE(exact.batches().size() == 2);
  // A random sampler's batches are its permutation, cut.
  Generator first(5), second(5);
  data::BatchSampler shuffled(data::RandomSampler(7, first), 2, false);
  std::vector<int64_t> flat;
  for (const auto& batch : shuffled.batches()) flat.insert(flat.end(), batch.begin(), batch.end());
  REQUIRE(flat == randperm(7, second).to_vector<int64_t>());
  REQUIRE_TG_ERROR(data::BatchSampler(data::SequentialSampler(4), 0, false),
                   Catch::Contains("BatchSampler") && Catch::Contains("batch_size=0"));
}
