// TensorDataset and random_split's index arithmetic.
#include <cmath>
#include <numeric>

#include "tapegrad/data/dataset.hpp"

namespace tg::data {

TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  check(data_.defined() && target_.defined(), "TensorDataset", "data and target must be defined tensors");
  check(data_.dim() >= 1 && target_.dim() >= 1, "TensorDataset", "data and target need a dim 0 to index, got ",
        data_.shape(), " and ", target_.shape());
  check(data_.size(0) == target_.size(0), "TensorDataset", "size mismatch between tensors: data ", data_.shape(),
        " and target ", target_.shape(), " differ in dim 0");
}

Example TensorDataset::get(int64_t index) const {
  const int64_t n = size();
  check(index >= -n && index < n, "TensorDataset", "index ", index, " is out of range for a dataset of ", n,
        " samples");
  // A batch of one, its dim 0 dropped.
  const Example one = get_batch({index < 0 ? index + n : index});
  const auto row_shape = [](const Tensor& t) { return Shape(t.shape().begin() + 1, t.shape().end()); };
  return {one.data.reshape(row_shape(one.data)), one.target.reshape(row_shape(one.target))};
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  Tensor index = empty({static_cast<int64_t>(indices.size())}, kInt64);
  int64_t* out = index.mutable_data<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) {
    check(indices[i] >= 0 && indices[i] < n, "TensorDataset", "index ", indices[i],
          " is out of range for a dataset of ", n, " samples");
    out[i] = indices[i];
  }
  return {index_select(data_, 0, index), index_select(target_, 0, index)};
}

namespace detail {

std::vector<std::vector<int64_t>> split_indices(int64_t size, const std::vector<int64_t>& lengths,
                                                Generator* generator) {
  int64_t total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    check(lengths[i] >= 0, "random_split", "length ", i, " is negative: ", lengths[i]);
    total += lengths[i];
  }
  check(total == size, "random_split", "the lengths sum to ", total, " but the dataset has ", size, " samples");
  const std::vector<int64_t> permutation = randperm(total, kInt64, generator).to_vector<int64_t>();
  std::vector<std::vector<int64_t>> splits;
  auto start = permutation.begin();
  for (const int64_t length : lengths) {
    splits.emplace_back(start, start + length);
    start += length;
  }
  return splits;
}

std::vector<int64_t> lengths_of(int64_t size, const std::vector<double>& lengths_or_fractions) {
  const double sum = std::accumulate(lengths_or_fractions.begin(), lengths_or_fractions.end(), 0.0);
  // math.isclose(sum, 1): relative tolerance 1e-9.
  const bool fractions = std::fabs(sum - 1.0) <= 1e-9 * std::max(std::fabs(sum), 1.0) && sum <= 1.0;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < lengths_or_fractions.size(); ++i) {
    const double value = lengths_or_fractions[i];
    if (fractions) {
      check(value >= 0.0 && value <= 1.0, "random_split", "fraction at index ", i, " is not between 0 and 1: ",
            value);
      lengths.push_back(static_cast<int64_t>(std::floor(static_cast<double>(size) * value)));
    } else {
      check(std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9.0e15, "random_split",
            "length ", i, " is ", value, ": expected whole numbers, or fractions that sum to 1");
      lengths.push_back(static_cast<int64_t>(value));
    }
  }
  if (fractions && !lengths.empty()) {
    const int64_t remainder = size - std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
    for (int64_t i = 0; i < remainder; ++i) ++lengths[static_cast<size_t>(i) % lengths.size()];
  }
  return lengths;
}

}  // namespace detail

}  // namespace tg::data
