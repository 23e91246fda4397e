/// @file
/// Datasets: anything with size() and get(i) returning an Example, as torch.utils.data.Dataset.
///
/// @code
///   tg::data::TensorDataset train(images, labels);              // images [N, ...], labels [N]
///   auto [fit, held_out] = tg::data::random_split(train, {50000, 10000}, generator);
///   tg::data::Example first = fit.get(0);                        // first.data, first.target
/// @endcode
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "tapegrad/error.hpp"
#include "tapegrad/generator.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::data {

/// One sample, or a batch of them once collated: an input and its target (torch::data::Example).
struct Example {
  Tensor data;    ///< the input
  Tensor target;  ///< what the model should predict for it
};

/// A map-style dataset: size() samples, get(i) for 0 <= i < size(). get may be called from several
/// threads at once (the DataLoader's prefetching), so it must not modify shared state.
template <typename D>
concept Dataset = requires(const D& dataset, int64_t index) {
  { dataset.size() } -> std::convertible_to<int64_t>;
  { dataset.get(index) } -> std::convertible_to<Example>;
};

/// A dataset that can also load a whole batch at once: get_batch(indices) equals collate() of the
/// get(i), made without a tensor per sample. The DataLoader uses it when there is no per-sample
/// transform.
template <typename D>
concept BatchDataset = Dataset<D> && requires(const D& dataset, const std::vector<int64_t>& indices) {
  { dataset.get_batch(indices) } -> std::convertible_to<Example>;
};

/// Samples are the rows (dim 0) of two tensors: get(i) = {data[i], target[i]}, as
/// torch.utils.data.TensorDataset(data, target). The tensors are shared, not copied.
class TensorDataset {
 public:
  /// tg::Error unless both are defined, have at least one dim, and the same size along dim 0.
  TensorDataset(Tensor data, Tensor target);

  int64_t size() const { return data_.size(0); }  ///< the number of samples (rows)
  Example get(int64_t index) const;  ///< copies of the rows; negative indices count from the end
  /// The rows at `indices` (0 <= index < size()), stacked: {data[indices], target[indices]}.
  Example get_batch(const std::vector<int64_t>& indices) const;

  const Tensor& data() const { return data_; }      ///< all the inputs, [N, ...]
  const Tensor& target() const { return target_; }  ///< all the targets, [N, ...]

 private:
  Tensor data_;    // [N, ...]
  Tensor target_;  // [N, ...]
};

/// The samples of `dataset` at `indices`, in that order (torch.utils.data.Subset). Subsets made
/// from one dataset share it.
template <Dataset D>
class Subset {
 public:
  /// tg::Error for a null dataset or an index outside [0, dataset->size()).
  Subset(std::shared_ptr<const D> dataset, std::vector<int64_t> indices)
      : dataset_(std::move(dataset)), indices_(std::move(indices)) {
    check(dataset_ != nullptr, "Subset", "the dataset is null");
    const int64_t n = dataset_->size();
    for (const int64_t index : indices_)
      check(index >= 0 && index < n, "Subset", "index ", index, " is out of range for a dataset of ", n,
            " samples");
  }
  /// The same over a copy of `dataset`.
  Subset(const D& dataset, std::vector<int64_t> indices)
      : Subset(std::make_shared<const D>(dataset), std::move(indices)) {}

  int64_t size() const { return static_cast<int64_t>(indices_.size()); }  ///< the number of indices
  /// Dataset().get(indices()[index]); negative counts from the end.
  Example get(int64_t index) const {
    check(index >= -size() && index < size(), "Subset", "index ", index, " is out of range for a subset of ",
          size(), " samples");
    return dataset_->get(indices_[static_cast<size_t>(index < 0 ? index + size() : index)]);
  }

  /// Only over a dataset that has get_batch itself: the subset's indices mapped to the dataset's.
  Example get_batch(const std::vector<int64_t>& indices) const
    requires BatchDataset<D>
  {
    std::vector<int64_t> mapped;
    mapped.reserve(indices.size());
    for (const int64_t index : indices) {
      check(index >= 0 && index < size(), "Subset", "index ", index, " is out of range for a subset of ", size(),
            " samples");
      mapped.push_back(indices_[static_cast<size_t>(index)]);
    }
    return dataset_->get_batch(mapped);
  }

  const D& dataset() const { return *dataset_; }                     ///< the dataset it selects from
  const std::vector<int64_t>& indices() const { return indices_; }  ///< the selected samples, in order

 private:
  std::shared_ptr<const D> dataset_;
  std::vector<int64_t> indices_;
};

namespace detail {
// PyTorch's random_split: randperm(sum(lengths), generator), cut into consecutive slices of
// `lengths`. tg::Error unless the lengths are >= 0 and sum to `size`.
std::vector<std::vector<int64_t>> split_indices(int64_t size, const std::vector<int64_t>& lengths,
                                                Generator* generator);
// torch.utils.data.random_split's reading of its `lengths`: values that sum to 1 (math.isclose,
// and at most 1) are fractions, each becoming floor(fraction · size) with the remainder handed out
// one by one round-robin from the first split; other values must be whole numbers, the lengths.
std::vector<int64_t> lengths_of(int64_t size, const std::vector<double>& lengths_or_fractions);
}  // namespace detail

/// Splits `dataset` into non-overlapping subsets of the given lengths, in random order: with the
/// same generator seed, the same samples land in the same subsets as with PyTorch's
/// random_split(dataset, lengths, generator=torch.Generator().manual_seed(seed)). Without a
/// generator it draws from the default one (tg::manual_seed), as PyTorch does. As in PyTorch,
/// `lengths` may be fractions that sum to 1: random_split(dataset, {0.8, 0.2}, generator).
///@{
template <Dataset D>
std::vector<Subset<D>> random_split(const D& dataset, const std::vector<int64_t>& lengths,
                                    Generator* generator = nullptr) {
  auto shared = std::make_shared<const D>(dataset);
  std::vector<Subset<D>> subsets;
  for (std::vector<int64_t>& indices : detail::split_indices(shared->size(), lengths, generator))
    subsets.emplace_back(shared, std::move(indices));
  return subsets;
}
template <Dataset D>
std::vector<Subset<D>> random_split(const D& dataset, const std::vector<double>& lengths_or_fractions,
                                    Generator* generator = nullptr) {
  return random_split(dataset, detail::lengths_of(dataset.size(), lengths_or_fractions), generator);
}
/// A braced list, {3, 7} or {0.8, 0.2}, lands here (an initializer_list beats both vectors).
template <Dataset D>
std::vector<Subset<D>> random_split(const D& dataset, std::initializer_list<double> lengths_or_fractions,
                                    Generator* generator = nullptr) {
  return random_split(dataset, std::vector<double>(lengths_or_fractions), generator);
}
template <Dataset D>
std::vector<Subset<D>> random_split(const D& dataset, const std::vector<int64_t>& lengths, Generator& generator) {
  return random_split(dataset, lengths, &generator);
}
template <Dataset D>
std::vector<Subset<D>> random_split(const D& dataset, const std::vector<double>& lengths_or_fractions,
                                    Generator& generator) {
  return random_split(dataset, lengths_or_fractions, &generator);
}
template <Dataset D>
std::vector<Subset<D>> random_split(const D& dataset, std::initializer_list<double> lengths_or_fractions,
                                    Generator& generator) {
  return random_split(dataset, std::vector<double>(lengths_or_fractions), &generator);
}
///@}

}  // namespace tg::data
