/// @file
/// Samplers: the order in which a pass over a dataset visits its samples, and how it groups them
/// into batches (torch.utils.data.SequentialSampler, RandomSampler, BatchSampler).
///
/// @code
///   tg::Generator generator(0);
///   tg::data::BatchSampler batches(tg::data::RandomSampler(10, generator), 4, /*drop_last=*/false);
///   for (const std::vector<int64_t>& batch : batches.batches()) ...  // [4 indices], [4], [2]
/// @endcode
///
/// Each call of indices() / batches() is one pass (an epoch); a random sampler draws a new order
/// for each pass from its generator, exactly as iterating its PyTorch counterpart again does.
#pragma once

#include <concepts>
#include <cstdint>
#include <utility>
#include <vector>

#include "tapegrad/generator.hpp"

namespace tg::data {

/// size() indices per pass; indices() returns the next pass's order.
template <typename S>
concept Sampler = requires(S& sampler, const S& const_sampler) {
  { const_sampler.size() } -> std::convertible_to<int64_t>;
  { sampler.indices() } -> std::same_as<std::vector<int64_t>>;
};

/// 0, 1, ..., size − 1.
class SequentialSampler {
 public:
  explicit SequentialSampler(int64_t size);  ///< tg::Error if size < 0
  int64_t size() const { return size_; }  ///< indices per pass
  std::vector<int64_t> indices();         ///< 0, 1, ..., size − 1

 private:
  int64_t size_;
};

/// A random permutation of 0 ... size − 1 per pass, as torch.utils.data.RandomSampler (without
/// replacement): randperm(size, generator). Without a generator each pass seeds a fresh one from
/// the default generator (one 64-bit draw, as PyTorch's torch.empty((), dtype=int64).random_()),
/// so tg::manual_seed(s) gives the orders torch.manual_seed(s) gives. Like PyTorch 1.13's, a pass
/// with a generator draws a second permutation that it discards, so that the generator's later
/// draws match too. The generator is not owned: it must outlive the sampler.
class RandomSampler {
 public:
  explicit RandomSampler(int64_t size, Generator* generator = nullptr);  ///< tg::Error unless size > 0
  RandomSampler(int64_t size, Generator& generator) : RandomSampler(size, &generator) {}  ///< draws from `generator`
  int64_t size() const { return size_; }  ///< indices per pass
  std::vector<int64_t> indices();         ///< the next pass's order

 private:
  int64_t size_;
  Generator* generator_;
};

namespace detail {
// `indices` cut into consecutive batches of batch_size, the last one shorter unless drop_last.
std::vector<std::vector<int64_t>> batches_of(const std::vector<int64_t>& indices, int64_t batch_size,
                                             bool drop_last);
void check_batch_size(const char* op, int64_t batch_size);  // tg::Error unless > 0
// Batches of a pass over n indices: floor(n / batch_size) with drop_last, else ceil(n / batch_size).
inline int64_t batch_count(int64_t n, int64_t batch_size, bool drop_last) {
  return drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}
}  // namespace detail

/// Groups the indices of another sampler into batches (torch.utils.data.BatchSampler).
template <Sampler S>
class BatchSampler {
 public:
  /// Batches of batch_size indices (> 0, else tg::Error), the last one shorter unless drop_last.
  BatchSampler(S sampler, int64_t batch_size, bool drop_last)
      : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
    detail::check_batch_size("BatchSampler", batch_size);
  }
  int64_t size() const { return detail::batch_count(sampler_.size(), batch_size_, drop_last_); }  ///< batches per pass
  /// The next pass's batches.
  std::vector<std::vector<int64_t>> batches() { return detail::batches_of(sampler_.indices(), batch_size_, drop_last_); }

 private:
  S sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

}  // namespace tg::data
