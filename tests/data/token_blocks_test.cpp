// TokenBlocks: blocks and their shifted targets by hand, nanoGPT's get_batch offsets.
#include <algorithm>
#include <set>

#include "data_test_util.hpp"
#include "tapegrad/data/token_blocks.hpp"

using namespace tg;

namespace {

// The sequence 100, 101, ..., 100 + n − 1: a token's value tells its position.
Tensor sequence(int64_t n) {
  std::vector<double> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<double>(100 + i));
  return tensor(values, {n}, kInt64);
}

std::vector<int64_t> row(const Tensor& t, int64_t r) {
  const std::vector<int64_t> all = t.to_vector<int64_t>();
  const int64_t width = t.size(1);
  return {all.begin() + r * width, all.begin() + (r + 1) * width};
}

}  // namespace

TEST_CASE("TokenBlocks cuts the sequence into non-overlapping blocks with targets one on", "[data][token_blocks]") {
  static_assert(data::BatchDataset<data::TokenBlocks>);
  // 10 tokens, blocks of 3: (10 − 1) / 3 = 3 blocks at 0, 3, 6; the last target is token 9.
  const data::TokenBlocks blocks(sequence(10), 3);
  REQUIRE(blocks.size() == 3);
  REQUIRE(blocks.block_size() == 3);
  const data::Example second = blocks.get(1);
  REQUIRE(second.data.shape() == Shape{3});
  REQUIRE(second.data.dtype() == kInt64);
  REQUIRE(second.data.to_vector<int64_t>() == std::vector<int64_t>{103, 104, 105});
  REQUIRE(second.target.to_vector<int64_t>() == std::vector<int64_t>{104, 105, 106});
  REQUIRE(blocks.get(-1).target.to_vector<int64_t>() == std::vector<int64_t>{107, 108, 109});
  const data::Example batch = blocks.get_batch({2, 0});
  REQUIRE(batch.data.shape() == Shape{2, 3});
  REQUIRE(batch.data.to_vector<int64_t>() == std::vector<int64_t>{106, 107, 108, 100, 101, 102});
  REQUIRE(batch.target.to_vector<int64_t>() == std::vector<int64_t>{107, 108, 109, 101, 102, 103});
  // 9 tokens: only (9 − 1) / 3 = 2 blocks, since the third would lack its last target.
  REQUIRE(data::TokenBlocks(sequence(9), 3).size() == 2);
  // Any offset, overlapping: the last allowed one is N − block − 1 = 6.
  const data::Example overlapping = blocks.at_offsets({1, 6});
  REQUIRE(overlapping.data.to_vector<int64_t>() == std::vector<int64_t>{101, 102, 103, 106, 107, 108});
  REQUIRE(overlapping.target.to_vector<int64_t>() == std::vector<int64_t>{102, 103, 104, 107, 108, 109});
}

TEST_CASE("TokenBlocks::sample draws nanoGPT's offsets from the generator", "[data][token_blocks]") {
  const int64_t n = 20, block = 4;
  const data::TokenBlocks blocks(sequence(n), block);
  Generator generator(7), same(7);
  const data::Example batch = blocks.sample(5, generator);
  REQUIRE(batch.data.shape() == Shape{5, block});
  REQUIRE(batch.target.shape() == Shape{5, block});
  // torch.randint(N − block, (B,)) from the same seed gives the blocks' first tokens.
  const std::vector<int64_t> offsets = randint(n - block, {5}, kInt64, &same).to_vector<int64_t>();
  for (int64_t b = 0; b < 5; ++b) {
    const int64_t o = offsets[static_cast<size_t>(b)];
    REQUIRE(row(batch.data, b) == std::vector<int64_t>{100 + o, 101 + o, 102 + o, 103 + o});
    REQUIRE(row(batch.target, b) == std::vector<int64_t>{101 + o, 102 + o, 103 + o, 104 + o});
  }
  // The generator moved on exactly as randint's did: the next draws agree too.
  REQUIRE(generator.get_state() == same.get_state());
  REQUIRE(blocks.sample(3, generator).data.to_vector<int64_t>() ==
          blocks.at_offsets(randint(n - block, {3}, kInt64, &same).to_vector<int64_t>()).data.to_vector<int64_t>());
  // Over many draws every offset in [0, N − block − 1] = [0, 15] appears, and none beyond.
  std::set<int64_t> seen;
  for (int i = 0; i < 100; ++i) {
    const std::vector<int64_t> first = blocks.sample(8, generator).data.to_vector<int64_t>();
    for (size_t b = 0; b < 8; ++b) seen.insert(first[b * block] - 100);
  }
  REQUIRE(seen.size() == static_cast<size_t>(n - block));
  REQUIRE(*seen.begin() == 0);
  REQUIRE(*seen.rbegin() == n - block - 1);
}

TEST_CASE("TokenBlocks refuses what cannot make a block", "[data][token_blocks][errors]") {
  REQUIRE_TG_ERROR(data::TokenBlocks(zeros({10}), 3), Catch::Contains("TokenBlocks") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(data::TokenBlocks(zeros({2, 5}, kInt64), 3), Catch::Contains("[2, 5]"));
  REQUIRE_TG_ERROR(data::TokenBlocks(sequence(10), 0), Catch::Contains("block_size >= 1, got 0"));
  REQUIRE_TG_ERROR(data::TokenBlocks(sequence(3), 3),
                   Catch::Contains("a block of 3 needs at least 4 tokens") && Catch::Contains("got 3"));
  const data::TokenBlocks blocks(sequence(10), 3);
  REQUIRE_TG_ERROR(blocks.get(3), Catch::Contains("index 3 is out of range for a dataset of 3 blocks"));
  REQUIRE_TG_ERROR(blocks.at_offsets({7}), Catch::Contains("offset 7 is outside [0, 6]"));
  Generator generator(0);
  REQUIRE_TG_ERROR(blocks.sample(0, generator), Catch::Contains("batch_size >= 1, got 0"));
}
