// DataLoader: batch orders against PyTorch's DataLoader (data.txt), collation and transforms by
// hand, and prefetching that changes nothing.
#include "data_test_util.hpp"

using namespace tg;
using tg::testing::fixture;

namespace {

// Samples 0 ... n − 1 whose data is their index and whose target is 10 × the index.
data::TensorDataset indices_dataset(int64_t n) {
  std::vector<double> targets;
  for (int64_t i = 0; i < n; ++i) targets.push_back(10.0 * static_cast<double>(i));
  return {data_test::arange(n), tensor(targets, {n}, kInt64)};
}

// Every batch of `epochs` passes: the data concatenated, and each batch's size. Checks that the
// targets travelled with their samples.
template <typename Loader>
std::pair<std::vector<int64_t>, std::vector<int64_t>> run_epochs(const Loader& loader, int epochs) {
  std::vector<int64_t> order, sizes;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (const data::Example& batch : loader) {
      const std::vector<int64_t> data = batch.data.to_vector<int64_t>();
      const std::vector<int64_t> target = batch.target.to_vector<int64_t>();
      REQUIRE(data.size() == target.size());
      for (size_t i = 0; i < data.size(); ++i) REQUIRE(target[i] == 10 * data[i]);
      order.insert(order.end(), data.begin(), data.end());
      sizes.push_back(batch.data.size(0));
    }
  }
  return {order, sizes};
}

}  // namespace

TEST_CASE("DataLoader(shuffle, generator) hands out PyTorch's batches, epoch after epoch",
          "[data][loader][fixture]") {
  const auto [n, batch_size] = GENERATE(std::pair<int64_t, int64_t>{10, 3}, std::pair<int64_t, int64_t>{7, 7},
                                        std::pair<int64_t, int64_t>{1000, 128});
  const bool drop_last = GENERATE(false, true);
  const int seed = GENERATE(0, 42);
  const int64_t prefetch = GENERATE(0, 1, 3);
  const auto& expected = fixture("data.txt", "loader_generator_n" + std::to_string(n) + "_b" +
                                                 std::to_string(batch_size) + "_drop" + std::to_string(drop_last) +
                                                 "_seed" + std::to_string(seed));
  Generator generator(static_cast<uint64_t>(seed));
  const data::DataLoader loader(indices_dataset(n), {.batch_size = batch_size,
                                                     .shuffle = true,
                                                     .drop_last = drop_last,
                                                     .generator = &generator,
                                                     .prefetch = prefetch});
  const auto [order, sizes] = run_epochs(loader, 2);
  CHECK(order == expected.ints("order"));
  CHECK(sizes == expected.ints("batch_sizes"));
  CHECK(2 * loader.size() == static_cast<int64_t>(sizes.size()));
  // The generator advanced exactly as torch's: its next draw is the same.
  CHECK(randperm(5, generator).to_vector<int64_t>() == expected.ints("after"));
}

TEST_CASE("DataLoader without a generator draws from the default one as PyTorch's does",
          "[data][loader][fixture]") {
  const bool shuffle = GENERATE(true, false);
  const auto& expected = fixture("data.txt", std::string("loader_default_generator_shuffle") + (shuffle ? "1" : "0"));
  manual_seed(7);
  const data::DataLoader loader(indices_dataset(10), {.batch_size = 4, .shuffle = shuffle});
  const auto [order, sizes] = run_epochs(loader, 2);
  CHECK(order == expected.ints("order"));
  CHECK(sizes == expected.ints("batch_sizes"));
  // Even in order, each epoch takes one 64-bit draw from the default generator, as PyTorch's does.
  CHECK(randperm(5).to_vector<int64_t>() == expected.ints("after"));
}

TEST_CASE("collate stacks samples along a new dim 0", "[data][loader]") {
  const std::vector<data::Example> samples = {
      {tensor({1, 2, 3, 4}, {2, 2}), scalar_tensor(0, kInt64)},
      {tensor({5, 6, 7, 8}, {2, 2}), scalar_tensor(1, kInt64)},
      {tensor({9, 10, 11, 12}, {2, 2}), scalar_tensor(2, kInt64)}};
  const data::Example batch = data::collate(samples);
  REQUIRE(batch.data.shape() == Shape{3, 2, 2});
  REQUIRE(batch.data.dtype() == kFloat32);
  REQUIRE(batch.data.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  REQUIRE(batch.target.shape() == Shape{3});
  REQUIRE(batch.target.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("collate refuses samples of different shapes or dtypes", "[data][loader][errors]") {
  REQUIRE_TG_ERROR(data::collate({{zeros({2}), zeros({})}, {zeros({3}), zeros({})}}),
                   Catch::Contains("collate") && Catch::Contains("data") && Catch::Contains("sample 0 has [2]") &&
                       Catch::Contains("sample 1 has [3]"));
  REQUIRE_TG_ERROR(data::collate({{zeros({2}), zeros({})}, {zeros({2}), zeros({}, kInt64)}}),
                   Catch::Contains("target") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(data::collate({}), Catch::Contains("no samples"));
}

TEST_CASE("DataLoader applies the per-sample transform before collation and the batch transform after",
          "[data][loader]") {
  const Tensor features = tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2}, kFloat64);
  const data::DataLoader loader(
      data::TensorDataset(features, data_test::arange(5)),
      {.batch_size = 2,
       .transform = [](data::Example sample) { return data::Example{sample.data.pow(2), sample.target}; },
       .batch_transform = [](data::Example batch) { return data::Example{batch.data.sum({1}), batch.target}; }});
  std::vector<double> sums;
  std::vector<int64_t> targets;
  for (const data::Example& batch : loader) {
    const std::vector<double> values = batch.data.to_vector<double>();
    sums.insert(sums.end(), values.begin(), values.end());
    const std::vector<int64_t> t = batch.target.to_vector<int64_t>();
    targets.insert(targets.end(), t.begin(), t.end());
  }
  // Each sample's squares summed: 0+1, 4+9, 16+25, 36+49, 64+81.
  REQUIRE(sums == std::vector<double>{1, 13, 41, 85, 145});
  REQUIRE(targets == std::vector<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("Prefetching changes neither the batches nor their order, at any thread count", "[data][loader]") {
  const Tensor features = randn({300, 7}, kFloat32, nullptr);
  const data::TensorDataset dataset(features, data_test::arange(300));
  // A transform that computes with the library's own (parallel) ops.
  auto transform = [](data::Example sample) { return data::Example{sample.data.tanh().exp(), sample.target}; };
  auto run = [&](int64_t prefetch, int threads) {
    set_num_threads(threads);
    Generator generator(123);
    const data::DataLoader loader(dataset, {.batch_size = 32,
                                            .shuffle = true,
                                            .generator = &generator,
                                            .prefetch = prefetch,
                                            .transform = transform});
    std::vector<float> all;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Example& batch : loader) {
        const std::vector<float> values = batch.data.to_vector<float>();
        all.insert(all.end(), values.begin(), values.end());
      }
    return all;
  };
  const int threads_before = get_num_threads();
  const std::vector<float> reference = run(0, 1);
  REQUIRE(reference.size() == 2 * 300 * 7);
  for (const int64_t prefetch : {1, 2, 8})
    for (const int threads : {1, 2}) {
      INFO("prefetch " << prefetch << ", " << threads << " threads");
      CHECK(run(prefetch, threads) == reference);
    }
  set_num_threads(threads_before);
}

TEST_CASE("DataLoader reports an error of a batch when that batch is reached, and may stop early",
          "[data][loader][errors]") {
  const int64_t prefetch = GENERATE(0, 2);
  const data::DataLoader loader(
      indices_dataset(10), {.batch_size = 2, .prefetch = prefetch, .transform = [](data::Example sample) {
                              check(sample.data.item<int64_t>() != 5, "my_transform", "sample 5 is bad");
                              return sample;
                            }});
  int64_t batches = 0;
  auto iterate = [&] {
    batches = 0;
    for (const data::Example& batch : loader) {
      (void)batch;
      ++batches;
    }
  };
  REQUIRE_TG_ERROR(iterate(), Catch::Contains("sample 5 is bad"));
  REQUIRE(batches == 2);  // [0, 1] and [2, 3] came before the batch [4, 5]
  // Leaving an epoch early waits for the batches in flight and ends cleanly.
  for (const data::Example& batch : loader) {
    REQUIRE(batch.data.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
    break;
  }
}

TEST_CASE("DataLoader sizes, empty datasets and bad options", "[data][loader][errors]") {
  REQUIRE(data::DataLoader(indices_dataset(10), {.batch_size = 3}).size() == 4);
  REQUIRE(data::DataLoader(indices_dataset(10), {.batch_size = 3, .drop_last = true}).size() == 3);
  const data::DataLoader empty_loader(indices_dataset(0), {.batch_size = 3});
  REQUIRE(empty_loader.size() == 0);
  REQUIRE(empty_loader.begin() == empty_loader.end());
  REQUIRE_TG_ERROR(data::DataLoader(indices_dataset(0), {.shuffle = true}).begin(),
                   Catch::Contains("RandomSampler") && Catch::Contains("num_samples=0"));
  REQUIRE_TG_ERROR(data::DataLoader(indices_dataset(4), {.batch_size = 0}),
                   Catch::Contains("DataLoader") && Catch::Contains("batch_size=0"));
  REQUIRE_TG_ERROR(data::DataLoader(indices_dataset(4), {.prefetch = -1}), Catch::Contains("prefetch"));
}

namespace {

// A dataset of the user's own, computed on the fly and without get_batch: sample i is
// ([i, i²], 10 · i).
struct Squares {
  int64_t count;
  int64_t size() const { return count; }
  data::Example get(int64_t i) const {
    const double x = static_cast<double>(i);
    return {tensor({x, x * x}, {2}, kFloat64), scalar_tensor(10.0 * x, kInt64)};
  }
};

}  // namespace

TEST_CASE("DataLoader over a dataset of one's own gives what the batched TensorDataset path gives",
          "[data][loader]") {
  static_assert(data::Dataset<Squares> && !data::BatchDataset<Squares>);
  std::vector<double> features;
  for (int64_t i = 0; i < 23; ++i) features.insert(features.end(), {static_cast<double>(i), static_cast<double>(i * i)});
  const data::TensorDataset table(tensor(features, {23, 2}, kFloat64), indices_dataset(23).target());
  const int64_t prefetch = GENERATE(0, 2);
  Generator first(9), second(9);
  const data::DataLoader computed(Squares{23}, {.batch_size = 5, .shuffle = true, .generator = &first, .prefetch = prefetch});
  const data::DataLoader stored(table, {.batch_size = 5, .shuffle = true, .generator = &second, .prefetch = prefetch});
  auto all = [](const auto& loader) {
    std::vector<double> data;
    std::vector<int64_t> targets;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const data::Example& batch : loader) {
        const std::vector<double> d = batch.data.template to_vector<double>();
        const std::vector<int64_t> t = batch.target.template to_vector<int64_t>();
        data.insert(data.end(), d.begin(), d.end());
        targets.insert(targets.end(), t.begin(), t.end());
      }
    return std::pair{data, targets};
  };
  const auto [computed_data, computed_targets] = all(computed);
  const auto [stored_data, stored_targets] = all(stored);
  REQUIRE(computed_data.size() == 2 * 23 * 2);
  REQUIRE(computed_data == stored_data);
  REQUIRE(computed_targets == stored_targets);
}
