#include "tapegrad/data/sampler.hpp"

#include <numeric>

#include "tapegrad/error.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::data {

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  check(size >= 0, "SequentialSampler", "expected a size >= 0, got ", size);
}

std::vector<int64_t> SequentialSampler::indices() {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

RandomSampler::RandomSampler(int64_t size, Generator* generator) : size_(size), generator_(generator) {
  check(size > 0, "RandomSampler", "num_samples should be a positive integer value, but got num_samples=", size);
}

std::vector<int64_t> RandomSampler::indices() {
  if (generator_ != nullptr) {
    std::vector<int64_t> order = randperm(size_, *generator_).to_vector<int64_t>();
    // PyTorch 1.13's RandomSampler yields randperm(n) once per whole pass and then
    // randperm(n)[:num_samples % n], drawing (and discarding) a second permutation even when
    // num_samples is n. Drawn here too, so the generator's next draws stay PyTorch's.
    randperm(size_, *generator_);
    return order;
  }
  // PyTorch: seed = torch.empty((), dtype=torch.int64).random_() — one 64-bit draw from the
  // default generator, reduced to [0, 2^63) — then a fresh generator seeded with it.
  const uint64_t seed = default_generator().random64() % (uint64_t{1} << 63);
  // (The second, discarded permutation is drawn from this private generator: nothing to mirror.)
  Generator generator(seed);
  return randperm(size_, generator).to_vector<int64_t>();
}

namespace detail {

void check_batch_size(const char* op, int64_t batch_size) {
  check(batch_size > 0, op, "batch_size should be a positive integer value, but got batch_size=", batch_size);
}

std::vector<std::vector<int64_t>> batches_of(const std::vector<int64_t>& indices, int64_t batch_size,
                                             bool drop_last) {
  std::vector<std::vector<int64_t>> batches;
  const auto batch = static_cast<size_t>(batch_size);
  for (size_t start = 0; start < indices.size(); start += batch) {
    const size_t stop = std::min(indices.size(), start + batch);
    if (drop_last && stop - start < batch) break;
    batches.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(start),
                         indices.begin() + static_cast<std::ptrdiff_t>(stop));
  }
  return batches;
}

}  // namespace detail

}  // namespace tg::data
