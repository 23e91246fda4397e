// TensorDataset, Subset and random_split: rows by hand, splits against PyTorch (data.txt).
#include "data_test_util.hpp"

using namespace tg;
using tg::testing::fixture;

TEST_CASE("TensorDataset returns copies of the rows of data and target", "[data][dataset]") {
  const Tensor data = tensor({1, 2, 3, 4, 5, 6}, {3, 2}, kFloat64);
  const Tensor target = tensor({7, 8, 9}, {3}, kInt64);
  const data::TensorDataset dataset(data, target);
  static_assert(data::Dataset<data::TensorDataset>);
  REQUIRE(dataset.size() == 3);
  const data::Example second = dataset.get(1);
  REQUIRE(second.data.shape() == Shape{2});
  REQUIRE(second.data.to_vector<double>() == std::vector<double>{3, 4});
  REQUIRE(second.target.dim() == 0);
  REQUIRE(second.target.item<int64_t>() == 8);
  REQUIRE(dataset.get(-1).data.to_vector<double>() == std::vector<double>{5, 6});
  // A copy: writing into the sample leaves the dataset as it was.
  second.data.detach().fill_(0);
  REQUIRE(dataset.get(1).data.to_vector<double>() == std::vector<double>{3, 4});
}

TEST_CASE("TensorDataset refuses tensors it cannot index together", "[data][dataset][errors]") {
  REQUIRE_TG_ERROR(data::TensorDataset(zeros({3, 2}), zeros({4})),
                   Catch::Contains("TensorDataset") && Catch::Contains("[3, 2]") && Catch::Contains("[4]"));
  REQUIRE_TG_ERROR(data::TensorDataset(scalar_tensor(1), zeros({1})), Catch::Contains("dim 0"));
  REQUIRE_TG_ERROR(data::TensorDataset(Tensor(), zeros({1})), Catch::Contains("defined"));
  const data::TensorDataset dataset(zeros({3, 2}), zeros({3}));
  REQUIRE_TG_ERROR(dataset.get(3), Catch::Contains("index 3 is out of range for a dataset of 3 samples"));
  REQUIRE_TG_ERROR(dataset.get(-4), Catch::Contains("index -4"));
}

TEST_CASE("Subset returns the samples at its indices, in their order", "[data][dataset]") {
  const data::TensorDataset dataset(data_test::arange(5), data_test::arange(5));
  const data::Subset<data::TensorDataset> subset(dataset, {4, 0, 2});
  REQUIRE(subset.size() == 3);
  REQUIRE(subset.get(0).data.item<int64_t>() == 4);
  REQUIRE(subset.get(2).target.item<int64_t>() == 2);
  REQUIRE(subset.get(-2).data.item<int64_t>() == 0);
  REQUIRE_TG_ERROR(subset.get(3), Catch::Contains("Subset") && Catch::Contains("index 3"));
  REQUIRE_TG_ERROR((data::Subset<data::TensorDataset>(dataset, {0, 5})),
                   Catch::Contains("index 5 is out of range for a dataset of 5 samples"));
}

namespace {

// The indices of each subset, concatenated, and the subsets' sizes.
template <typename Subsets>
std::pair<std::vector<int64_t>, std::vector<int64_t>> flatten(const Subsets& subsets) {
  std::vector<int64_t> indices, sizes;
  for (const auto& subset : subsets) {
    sizes.push_back(subset.size());
    for (int64_t i = 0; i < subset.size(); ++i) indices.push_back(subset.get(i).data.template item<int64_t>());
  }
  return {indices, sizes};
}

}  // namespace

TEST_CASE("random_split puts the samples where PyTorch's random_split does", "[data][dataset][fixture]") {
  const std::string name = GENERATE("lengths", "three", "fractions", "fractions_remainder");
  const auto& expected = fixture("data.txt", "random_split_" + name);
  const int64_t n = expected.ints("n")[0];
  const std::vector<double> lengths = expected.at("lengths").to_vector<double>();
  const data::TensorDataset dataset(data_test::arange(n), data_test::arange(n));
  Generator generator(42);
  const auto [indices, sizes] = flatten(data::random_split(dataset, lengths, generator));
  CHECK(sizes == expected.ints("sizes"));
  CHECK(indices == expected.ints("indices"));
}

TEST_CASE("random_split takes lengths as a braced list, an int64 vector, or fractions", "[data][dataset]") {
  const data::TensorDataset dataset(data_test::arange(10), data_test::arange(10));
  const auto& expected = fixture("data.txt", "random_split_lengths");  // lengths {3, 7}, seed 42
  Generator braced(42), integers(42);
  CHECK(flatten(data::random_split(dataset, {3, 7}, braced)).first == expected.ints("indices"));
  CHECK(flatten(data::random_split(dataset, std::vector<int64_t>{3, 7}, integers)).first == expected.ints("indices"));
  // Without a generator: the default one, as torch.manual_seed(42) makes it.
  manual_seed(42);
  CHECK(flatten(data::random_split(dataset, {0.3, 0.7})).first == expected.ints("indices"));
}

TEST_CASE("random_split refuses lengths that do not add up to the dataset", "[data][dataset][errors]") {
  const data::TensorDataset dataset(data_test::arange(10), data_test::arange(10));
  Generator generator(0);
  REQUIRE_TG_ERROR(data::random_split(dataset, {3, 6}, generator),
                   Catch::Contains("random_split") && Catch::Contains("sum to 9 but the dataset has 10 samples"));
  REQUIRE_TG_ERROR(data::random_split(dataset, std::vector<int64_t>{-1, 11}, generator),
                   Catch::Contains("length 0 is negative"));
  REQUIRE_TG_ERROR(data::random_split(dataset, {2.5, 7.5}, generator), Catch::Contains("length 0 is 2.5"));
  REQUIRE_TG_ERROR(data::random_split(dataset, {1.5, -0.5}, generator), Catch::Contains("fraction at index 0"));
}

TEST_CASE("get_batch equals the collated samples, for TensorDataset and a Subset of it", "[data][dataset]") {
  const Tensor features = tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3}, kFloat64);
  const data::TensorDataset dataset(features, tensor({5, 6, 7, 8}, {4}, kInt64));
  static_assert(data::BatchDataset<data::TensorDataset>);
  const std::vector<int64_t> indices = {3, 0, 3};
  const data::Example batch = dataset.get_batch(indices);
  REQUIRE(batch.data.shape() == Shape{3, 3});
  REQUIRE(batch.data.to_vector<double>() == std::vector<double>{9, 10, 11, 0, 1, 2, 9, 10, 11});
  REQUIRE(batch.target.to_vector<int64_t>() == std::vector<int64_t>{8, 5, 8});
  const data::Example collated = data::collate({dataset.get(3), dataset.get(0), dataset.get(3)});
  REQUIRE(collated.data.to_vector<double>() == batch.data.to_vector<double>());
  REQUIRE(collated.target.to_vector<int64_t>() == batch.target.to_vector<int64_t>());

  const data::Subset<data::TensorDataset> subset(dataset, {2, 1});
  static_assert(data::BatchDataset<data::Subset<data::TensorDataset>>);
  REQUIRE(subset.get_batch({1, 0}).target.to_vector<int64_t>() == std::vector<int64_t>{6, 7});
  REQUIRE(dataset.get_batch({}).data.shape() == Shape{0, 3});
  REQUIRE_TG_ERROR(dataset.get_batch({0, 4}), Catch::Contains("index 4 is out of range for a dataset of 4 samples"));
  REQUIRE_TG_ERROR(subset.get_batch({-1}), Catch::Contains("index -1 is out of range for a subset of 2 samples"));
}
