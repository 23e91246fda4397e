#include "tapegrad/data/distributed_sampler.hpp"

#include <numeric>

#include "tapegrad/error.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::data {

DistributedSampler::DistributedSampler(int64_t size, DistributedSamplerOptions options)
    : dataset_size_(size), options_(options) {
  check(size >= 0, "DistributedSampler", "expected a dataset size >= 0, got ", size);
  check(options.num_replicas >= 1, "DistributedSampler", "expected num_replicas >= 1, got ", options.num_replicas);
  check(options.rank >= 0 && options.rank < options.num_replicas, "DistributedSampler", "Invalid rank ", options.rank,
        ", rank should be in the interval [0, ", options.num_replicas - 1, "]");
  const int64_t replicas = options.num_replicas;
  // PyTorch: ceil((n − R) / R) when dropping an uneven tail, which is (n − 1) / R rounded down
  // for n % R ≠ 0 (0 when n < R), else ceil(n / R).
  num_samples_ = options.drop_last && size % replicas != 0 ? (size - 1) / replicas : (size + replicas - 1) / replicas;
}

std::vector<int64_t> DistributedSampler::indices() {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    Generator generator(options_.seed + static_cast<uint64_t>(epoch_));  // the same order on every replica
    order = randperm(dataset_size_, generator).to_vector<int64_t>();
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const auto total = static_cast<size_t>(num_samples_ * options_.num_replicas);
  if (options_.drop_last) {
    order.resize(total);
  } else {
    // Pad by repeating the order from its start, as often as needed (PyTorch's indices * k).
    for (size_t i = 0; order.size() < total; ++i) {
      const int64_t repeated = order[i];
      order.push_back(repeated);
    }
  }
  std::vector<int64_t> share;
  share.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(options_.rank); i < total; i += static_cast<size_t>(options_.num_replicas)) {
    share.push_back(order[i]);
  }
  return share;
}

}  // namespace tg::data
